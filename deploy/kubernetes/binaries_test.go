package kubernetes

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/deploy/internal/ociimage"
	"github.com/statecast/statecast/examples/sportsbook/demo"
	"github.com/statecast/statecast/internal/probe/grpcprobe"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestProbesAgainstBinaries runs the binaries of the images the way each overlay's pods
// run them — the Deployment's args, its mounted config file, its environment (the
// PostgreSQL and Kafka of the test environment standing in for the Secret and the Strimzi
// cluster), the topic as its KafkaTopic describes it — and calls the probes the manifests
// name, on the ports they name: both distributor replicas become ready (GET /readyz), one
// active and one standby; the player becomes ready (its gRPC health, or GET /readyz where
// it serves TLS from its Secret) once it caught up, and live on GET /livez. The images'
// -probe health checks (docker compose) pass too.
//
// As a container runtime maps a pod's ports, each container port is mapped to a free port
// on 127.0.0.1 (TestOverlays checks that the container ports are the configs' ports).
func TestProbesAgainstBinaries(t *testing.T) {
	admin := testenv.PostgresDSN(t)
	brokers := testenv.KafkaBrokers(t)
	mod, err := ociimage.RootModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, name := range []string{"distributor", "player"} {
		spec, _ := ociimage.Lookup(name)
		if err := ociimage.BuildBinary(ctx, mod, spec.Package, filepath.Join(bin, name), ociimage.Build{Version: "v0.0.0-test", Commit: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			o := decodeAll(t, render(t, overlay))
			dsn := demoDatabase(t, admin)
			topic := createTopic(t, brokers, o.Topics[0])
			slot := testenv.UniqueName("k8s")
			// The Secrets: the database's DSN; where the overlay reaches Kafka over TLS with
			// SCRAM, the test broker's SASL_SSL listener stands for Strimzi's TLS listener,
			// its CA for the cluster CA's Secret, its one SCRAM user (name and password) for
			// each KafkaUser, as the test's topic stands for the KafkaTopic.
			secrets := map[string]string{"statecast-postgres/dsn": dsn}
			files := maps.Clone(secretFiles(t))
			broker := brokers[0]
			secured := kafkaTLS(t, o, o.Deployments["distributor"])
			var sasl kafkaconn.Config
			if secured {
				sasl = testenv.KafkaSASL(t)
				broker = sasl.Brokers[0]
				ca, err := os.ReadFile(sasl.TLS.CAFile)
				if err != nil {
					t.Fatal(err)
				}
				files[clusterCASecret(o)+"/"+caKey] = string(ca)
				for name := range o.Users {
					secrets[name+"/password"] = sasl.SASL.Password
				}
			}
			kafkaUser := func(cfg map[string]any) {
				if k, _ := cfg["kafka"].(map[string]any); k != nil && secured {
					if s, _ := k["sasl"].(map[string]any); s != nil {
						s["user"] = sasl.SASL.User
					}
				}
			}

			d := o.Deployments["distributor"]
			var dist []*pod
			for i := range replicas(d) {
				p := startPod(t, filepath.Join(bin, "distributor"), o, d, secrets, files, broker,
					func(cfg map[string]any, ports portMap) {
						cfg["http_addr"] = ports.addr(t, cfg["http_addr"])
						for _, s := range cfg["streams"].([]any) {
							s := s.(map[string]any)
							s["topic"], s["slot"] = topic, slot
						}
						kafkaUser(cfg)
					})
				p.name = fmt.Sprintf("distributor-%d", i)
				dist = append(dist, p)
			}
			for _, p := range dist {
				p.waitProbe(t, p.container.ReadinessProbe, 2*time.Minute)
				p.waitProbe(t, p.container.LivenessProbe, 10*time.Second)
			}
			// One active, one standby: both ready.
			deadline := time.Now().Add(time.Minute)
			for {
				var states []string
				for _, p := range dist {
					states = append(states, p.healthz(t)[topic])
				}
				if strings.Join(states, ",") == "active,standby" || strings.Join(states, ",") == "standby,active" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("distributor states %v, want one active and one standby", states)
				}
				time.Sleep(100 * time.Millisecond)
			}

			pl := startPod(t, filepath.Join(bin, "player"), o, o.Deployments["player"], secrets, files, broker,
				func(cfg map[string]any, ports portMap) {
					cfg["listen"] = ports.addr(t, cfg["listen"])
					cfg["http_addr"] = ports.addr(t, cfg["http_addr"])
					for _, s := range cfg["streams"].([]any) {
						s.(map[string]any)["topic"] = topic
					}
					kafkaUser(cfg)
				})
			pl.name = "player"
			pl.waitProbe(t, pl.container.ReadinessProbe, 2*time.Minute)
			pl.waitProbe(t, pl.container.LivenessProbe, 10*time.Second)
			tlsServed := false
			if secret, _ := secretFile(o.Deployments["player"], "/var/run/secrets/statecast/tls/tls.crt"); secret != "" {
				tlsServed = true
				if !strings.Contains(pl.out.String(), `"msg":"gRPC is served over TLS","mutual_tls":false,"tokens":true`) {
					t.Errorf("the player does not serve TLS with tokens from its Secrets:\n%s", pl.out.String())
				}
			}
			if secured {
				// Each reached Kafka over TLS as its SCRAM user (the listener takes nothing else).
				for _, p := range append(dist, pl) {
					if want := `"tls":true,"sasl":"SCRAM-SHA-512"`; !strings.Contains(p.out.String(), want) {
						t.Errorf("%s: its start-up line does not say %s:\n%s", p.name, want, p.out.String())
					}
				}
			}

			// docker compose's health checks: the binaries probing themselves (gRPC health
			// where the player serves plaintext)
			grpcPort := pl.ports[containerPort(t, pl.container, intstr.FromString("grpc"))]
			httpPort := pl.ports[containerPort(t, pl.container, intstr.FromString("http"))]
			cmds := [][]string{
				{filepath.Join(bin, "player"), "-probe", "http://127.0.0.1:" + strconv.Itoa(httpPort) + "/readyz"},
				{filepath.Join(bin, "distributor"), "-probe", "http://127.0.0.1:" + strconv.Itoa(dist[0].ports[containerPort(t, dist[0].container, intstr.FromString("http"))]) + "/readyz"},
			}
			if pl.container.ReadinessProbe.GRPC != nil {
				cmds = append(cmds, []string{filepath.Join(bin, "player"), "-probe", "grpc://127.0.0.1:" + strconv.Itoa(grpcPort)})
			}
			for _, cmd := range cmds {
				if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
					t.Errorf("%q: %v\n%s", cmd, err, out)
				}
			}
			if tlsServed {
				checkClients(t, "127.0.0.1:"+strconv.Itoa(grpcPort))
			}
		})
	}
}

// checkClients: a service whose token the tokens Secret holds and the access rules grant
// reads the stream through the player's TLS; one whose token is there but not granted is
// refused with PermissionDenied.
func checkClients(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tlsc := &tls.Config{RootCAs: pkiCA.Pool, MinVersion: tls.VersionTLS12}
	subscribe := func(token string, refused chan<- error) *cacheclient.Client {
		c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "sportsbook", Service: "sportsbook",
			TLS: tlsc, Token: cacheclient.StaticToken(token)},
			cacheclient.WithHooks(cacheclient.Hooks{OnDisconnect: func(_ string, err error) {
				if status.Code(err) == codes.PermissionDenied && refused != nil {
					select {
					case refused <- err:
					default:
					}
				}
			}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := cacheclient.Register(c, "sports", func(string, []byte) (int, error) { return 0, nil }); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	granted := subscribe(sportsbookToken, nil)
	if err := granted.WaitReady(ctx); err != nil {
		t.Errorf("the sportsbook service with its token: %v (%+v)", err, granted.Stats())
	}
	refused := make(chan error, 1)
	subscribe(ungrantedToken, refused)
	select {
	case err := <-refused:
		t.Logf("a service without a grant: %v", err)
	case <-ctx.Done():
		t.Error("a service whose token holds no grant was not refused with PermissionDenied")
	}
}

// demoDatabase creates a database seeded with the demo's schema (the manifests publish the
// demo's views) and drops it, with the slots of its distributors, at the end.
func demoDatabase(t *testing.T, admin string) string {
	t.Helper()
	name := testenv.UniqueName("k8s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := demo.Seed(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_ = demo.DropSlots(ctx, c, name)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return dsn
}

// createTopic creates the topic as Strimzi's topic operator would from kt, under a unique
// name, on the test's single broker: one replica, and without min.insync.replicas (a
// second in-sync replica cannot exist there).
func createTopic(t *testing.T, brokers []string, kt KafkaTopic) string {
	t.Helper()
	name := testenv.UniqueName(kt.Spec.TopicName)
	cfg := map[string]*string{}
	for k, v := range kt.Spec.Config {
		if k != "min.insync.replicas" {
			s := fmt.Sprint(v)
			cfg[k] = &s
		}
	}
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("k8s-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: kt.Spec.Partitions, ReplicationFactor: 1, ConfigEntries: cfg}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("k8s-test")); err == nil {
			_ = a.DeleteTopic(name)
			a.Close()
		}
	})
	return name
}

// portMap maps a container's ports to free ports of 127.0.0.1.
type portMap map[int32]int

// addr maps a config's listen address (":7070") to its free port.
func (m portMap) addr(t *testing.T, v any) string {
	t.Helper()
	p := portOf(t, fmt.Sprint(v))
	hp, ok := m[p]
	if !ok {
		t.Fatalf("the config listens on %d, which is no container port", p)
	}
	return "127.0.0.1:" + strconv.Itoa(hp)
}

// pod is one running binary, as a pod's container.
type pod struct {
	name      string
	container corev1.Container
	ports     portMap
	cmd       *exec.Cmd
	exited    <-chan struct{} // closed when cmd.Wait returned
	out       *testenv.LockedBuffer
}

// startPod runs exe as d's container: the config file of its ConfigMap at the path the
// args name (the mount emulated by a directory), its Secret volumes holding files
// (secret/key: body), the config edited by rewrite to the mapped ports and the test's names,
// and the container's environment (Secret keys from secrets, secret/key: value) with the
// test's Kafka at broker.
func startPod(t *testing.T, exe string, o objects, d appsv1.Deployment, secrets, files map[string]string, broker string,
	rewrite func(cfg map[string]any, ports portMap)) *pod {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	p := &pod{container: c, ports: portMap{}, out: &testenv.LockedBuffer{}}
	for _, cp := range c.Ports {
		_, port, _ := strings.Cut(testenv.FreeAddr(t), ":")
		n, _ := strconv.Atoi(port)
		p.ports[cp.ContainerPort] = n
	}
	cm, key, mount := configOf(t, o, d)
	// The Secret volumes: a directory each, holding the files the test has for them.
	text := mountSecrets(t, d, cm.Data[key], files)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	rewrite(cfg, p.ports)
	// The admin endpoint listens on the pod's loopback: here, any free port of this host.
	admin, _ := cfg["admin"].(map[string]any)
	if admin == nil {
		admin = map[string]any{}
	}
	admin["addr"] = "127.0.0.1:0"
	cfg["admin"] = admin
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, key), out, 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, strings.Replace(a, mount.MountPath, dir, 1))
	}
	env := podEnv(t, o, c, secrets)
	env["STATECAST_KAFKA_BROKERS"] = broker
	p.cmd = exec.Command(exe, args...)
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	p.exited = done
	go func() { _ = p.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// check runs a probe once, as the kubelet does: an HTTP GET answered 2xx or 3xx, or a
// gRPC health check answered SERVING, on the mapped port.
func (p *pod) check(t *testing.T, pr *corev1.Probe) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		port := p.ports[containerPort(t, p.container, pr.HTTPGet.Port)]
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+pr.HTTPGet.Path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", pr.HTTPGet.Path, resp.Status)
		}
		return nil
	case pr.GRPC != nil:
		port := p.ports[containerPort(t, p.container, intstr.FromInt32(pr.GRPC.Port))]
		u := &url.URL{Scheme: grpcprobe.Scheme, Host: "127.0.0.1:" + strconv.Itoa(port)}
		if pr.GRPC.Service != nil {
			u.Path = "/" + *pr.GRPC.Service
		}
		return grpcprobe.Check(ctx, u)
	}
	t.Fatalf("%s: a probe the test cannot run: %+v", p.name, pr)
	return nil
}

// waitProbe waits until the probe succeeds, or fails the test after within.
func (p *pod) waitProbe(t *testing.T, pr *corev1.Probe, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := p.check(t, pr)
		if err == nil {
			return
		}
		select {
		case <-p.exited: // Wait has returned: ProcessState is set and no longer written
			t.Fatalf("%s exited: %v", p.name, p.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: probe %+v still failing after %v: %v", p.name, pr.ProbeHandler, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// healthz returns the distributor's /healthz streams.
func (p *pod) healthz(t *testing.T) map[string]string {
	t.Helper()
	port := p.ports[containerPort(t, p.container, intstr.FromString("http"))]
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Streams map[string]string `json:"streams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Streams
}

var (
	pkiOnce sync.Once
	pki     map[string]string
	pkiCA   *testenv.PKI // its CA verifies the player's certificate
)

// The tokens of the tokens Secret: the sportsbook service's, which the production
// player's access rules grant, and one of a service they do not.
const (
	sportsbookToken = "a-token-of-the-sportsbook-service"
	ungrantedToken  = "a-token-of-a-service-without-a-grant"
)

// caKey is the key of the CA in Strimzi's <cluster>-cluster-ca-cert Secret.
const caKey = "ca.crt"

// clusterCASecret is the Secret in which Strimzi's Cluster Operator keeps the CA of the
// Kafka cluster of the rendering's topics.
func clusterCASecret(o objects) string {
	return o.Topics[0].Metadata.Labels["strimzi.io/cluster"] + "-cluster-ca-cert"
}

// secretFiles stand for the files of the Secrets an operator or an operator's controller
// creates (secret/key: body): cert-manager's player-tls, the clients' tokens, Strimzi's
// cluster CA (a test CA: TestProbesAgainstBinaries puts the test broker's in its place).
func secretFiles(t *testing.T) map[string]string {
	t.Helper()
	pkiOnce.Do(func() {
		p := testenv.NewPKI(t)
		read := func(path string) string {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		pkiCA = p
		pki = map[string]string{
			"player-tls/tls.crt":                 read(p.ServerCert),
			"player-tls/tls.key":                 read(p.ServerKey),
			"player-tokens/tokens":               "sportsbook=" + sportsbookToken + "\nreporting=" + ungrantedToken + "\n",
			"statecast-cluster-ca-cert/" + caKey: read(p.CAFile),
		}
	})
	return pki
}

// kafkaTLS reports whether d's config reaches Kafka over TLS.
func kafkaTLS(t *testing.T, o objects, d appsv1.Deployment) bool {
	t.Helper()
	cm, key, _ := configOf(t, o, d)
	var cfg struct {
		Kafka struct {
			TLS struct {
				Enabled bool `yaml:"enabled"`
			} `yaml:"tls"`
		} `yaml:"kafka"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Kafka.TLS.Enabled
}
