package kubernetes

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/statecast/statecast/deploy/internal/ociimage"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/player"
)

func matches(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(l))
}

// containerPort resolves a probe's or a Service's port (a name or a number) to the
// container's port, which it must be.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("%s: port %s is not a port of the container", c.Name, p.String())
	return 0
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// podEnv resolves the container's environment as the kubelet would: values, ConfigMap
// keys from the rendering, and Secret keys from secrets (the manifests hold no Secret).
func podEnv(t *testing.T, o objects, c corev1.Container, secrets map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := findConfigMap(o, ref.Name)
			if !ok {
				t.Fatalf("%s: env %s refers to ConfigMap %s, not in the rendering", c.Name, e.Name, ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				t.Fatalf("%s: env %s refers to %s/%s, which does not exist", c.Name, e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secrets[ref.Name+"/"+ref.Key]
			if !ok {
				t.Fatalf("%s: env %s refers to Secret %s/%s, which the test does not know", c.Name, e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		default:
			t.Fatalf("%s: env %s: unexpected valueFrom %+v", c.Name, e.Name, e.ValueFrom)
		}
	}
	return env
}

// findConfigMap finds a generated ConfigMap by the name in the base (before the hash).
func findConfigMap(o objects, name string) (corev1.ConfigMap, bool) {
	if cm, ok := o.ConfigMaps[name]; ok {
		return cm, true
	}
	return corev1.ConfigMap{}, false
}

// withEnv makes the process environment hold exactly env for the names file refers to.
func withEnv(t *testing.T, file string, env map[string]string) {
	t.Helper()
	for _, m := range envRef.FindAllStringSubmatch(file, -1) {
		t.Setenv(m[1], "")
		if v, ok := env[m[1]]; ok {
			t.Setenv(m[1], v)
		} else {
			os.Unsetenv(m[1])
		}
	}
}

// testSecrets stand for the Secrets an operator creates (the manifests only refer to them).
var testSecrets = map[string]string{"statecast-postgres/dsn": "postgres://statecast:secret@postgres.example:5432/statecast?sslmode=require"}

// loadConfig writes the Deployment's mounted config file to a directory, resolves its
// environment and loads it with the binary's own loader.
func loadConfig[C any](t *testing.T, o objects, d appsv1.Deployment, load func(string) (*C, error)) (*C, string) {
	t.Helper()
	cm, key, _ := configOf(t, o, d)
	text := cm.Data[key]
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	withEnv(t, text, podEnv(t, o, d.Spec.Template.Spec.Containers[0], testSecrets))
	c, err := load(path)
	if err != nil {
		t.Fatalf("%s: %s: %v", d.Name, key, err)
	}
	return c, text
}

// sizing reads a Deployment's statecast.io/sizing annotation.
func sizing(t *testing.T, d appsv1.Deployment) map[string]int64 {
	t.Helper()
	s, ok := d.Annotations["statecast.io/sizing"]
	if !ok {
		t.Fatalf("%s: no statecast.io/sizing annotation", d.Name)
	}
	out := map[string]int64{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: sizing %q: %v", d.Name, f, err)
		}
		out[k] = n
	}
	return out
}

// The memory model of docs/operations.md ("Sizing a player", "Sizing a distributor").
const (
	mib                    = 1 << 20
	baseBytes              = 64 * mib // runtime, gRPC, Kafka and PostgreSQL clients
	playerRowOverhead      = 300      // the materialized copy's item, map entry and order slots, headers
	bootstrapBytesPerRow   = 16       // a bootstrapping target's copy of the row list
	distributorRowOverhead = 100      // an epoch's held row (40) and its key → hash entry (60)
	headroom               = 1.5      // the Go heap's room above the live bytes
)

func playerLive(s map[string]int64, streams int, c *player.Config) int64 {
	return s["rows"]*(s["value-bytes"]+2*s["key-bytes"]+playerRowOverhead) + int64(streams)*c.HistoryBytes +
		s["targets"]*c.TargetBudgetBytes + s["bootstraps"]*s["rows"]*bootstrapBytesPerRow + baseBytes
}

func distributorLive(s map[string]int64) int64 {
	return s["rows"]*(s["key-bytes"]+s["value-bytes"]+distributorRowOverhead) + baseBytes
}

// parseBytes reads a GOMEMLIMIT value (bytes, or with a KiB/MiB/GiB suffix).
func parseBytes(t *testing.T, s string) int64 {
	t.Helper()
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", s, err)
	}
	return n * mult
}

// checkMemory: the container's memory is sized by the model for the annotation's inputs:
// a limit with headroom above the live bytes, requested in full, and GOMEMLIMIT at 90%.
func checkMemory(t *testing.T, d appsv1.Deployment, live int64) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	limit, req := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
	if limit.IsZero() || req.Cmp(*limit) != 0 {
		t.Errorf("%s: memory request %v, limit %v: want both, equal", d.Name, req, limit)
	}
	if need := int64(float64(live) * headroom); limit.Value() < need {
		t.Errorf("%s: memory limit %v < %d MiB (the model: %d MiB live × %.1f)", d.Name, limit, need/mib, live/mib, headroom)
	}
	var gml string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gml = e.Value
		}
	}
	if g := parseBytes(t, gml); float64(g) < 0.85*float64(limit.Value()) || float64(g) > 0.95*float64(limit.Value()) {
		t.Errorf("%s: GOMEMLIMIT %q is not about 90%% of the limit %v", d.Name, gml, limit)
	}
}

// checkPod: what both daemons' pods share: the image's binary and user, a read-only root,
// no privilege, its config mounted read-only.
func checkPod(t *testing.T, o objects, d appsv1.Deployment, image string) {
	t.Helper()
	spec, _ := ociimage.Lookup(image)
	ps := d.Spec.Template.Spec
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers", d.Name, len(ps.Containers))
	}
	c := ps.Containers[0]
	if !strings.HasSuffix(strings.Split(c.Image, ":")[0], "statecast/"+image) {
		t.Errorf("%s: image %s", d.Name, c.Image)
	}
	if len(c.Command) != 0 || !slices.Equal(c.Args, spec.Cmd) {
		t.Errorf("%s: command %q args %q, want the image's entrypoint and %q", d.Name, c.Command, c.Args, spec.Cmd)
	}
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != ociimage.UID {
		t.Errorf("%s: pod security context %+v: want non-root, the image's user %d", d.Name, ps.SecurityContext, ociimage.UID)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: container security context %+v", d.Name, c.SecurityContext)
	}
	if _, _, m := configOf(t, o, d); !m.ReadOnly || m.MountPath != ociimage.ConfigDir {
		t.Errorf("%s: config mounted at %s (read-only %v), want %s read-only", d.Name, m.MountPath, m.ReadOnly, ociimage.ConfigDir)
	}
	if a := ps.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("%s: no pod anti-affinity", d.Name)
	} else {
		terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		for _, term := range terms {
			if term.TopologyKey != "kubernetes.io/hostname" || !matches(t, term.LabelSelector, d.Spec.Template.Labels) {
				t.Errorf("%s: anti-affinity term %+v does not keep its own pods apart per node", d.Name, term)
			}
		}
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ToUpper(e.Name), "DSN") || strings.Contains(strings.ToUpper(e.Name), "PASSWORD") {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s: env %s is not taken from a Secret", d.Name, e.Name)
			}
		}
	}
	if !matches(t, d.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("%s: selector does not match its pods", d.Name)
	}
	pdb, ok := o.PDBs[d.Name]
	if !ok || !matches(t, pdb.Spec.Selector, d.Spec.Template.Labels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("%s: no PodDisruptionBudget of maxUnavailable 1 over its pods", d.Name)
	}
}

func replicas(d appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// TestOverlays renders each overlay and checks it: every object decodes strictly, the
// player and distributor Deployments serve the ports and probes their configs say, are
// sized by the memory model, and the topics, Services, ServiceMonitor and NetworkPolicies
// fit them.
func TestOverlays(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			o := decodeAll(t, render(t, overlay))
			if len(o.Namespaces) != 1 || len(o.Deployments) != 2 || len(o.Services) != 3 || len(o.PDBs) != 2 ||
				len(o.NetworkPolicies) != 2 || len(o.Topics) != 1 || len(o.Monitors) != 1 || len(o.ConfigMaps) != 3 {
				t.Fatalf("objects: %d namespaces, %d deployments, %d services, %d PDBs, %d network policies, %d topics, %d monitors, %d config maps",
					len(o.Namespaces), len(o.Deployments), len(o.Services), len(o.PDBs), len(o.NetworkPolicies), len(o.Topics), len(o.Monitors), len(o.ConfigMaps))
			}
			checkPlayer(t, overlay, o)
			checkDistributor(t, overlay, o)
			checkMonitoring(t, o)
		})
	}
}

func checkPlayer(t *testing.T, overlay string, o objects) {
	d, ok := o.Deployments["player"]
	if !ok {
		t.Fatal("no player Deployment")
	}
	checkPod(t, o, d, "player")
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 3 {
		t.Errorf("player replicas %d, want at least 3", replicas(d))
	}
	cfg, _ := loadConfig(t, o, d, player.LoadConfig)
	c := d.Spec.Template.Spec.Containers[0]
	grpcPort, httpPort := portOf(t, cfg.Listen), portOf(t, cfg.HTTPAddr)
	if p := containerPort(t, c, intstr.FromString("grpc")); p != grpcPort {
		t.Errorf("container port grpc %d, the config listens on %d", p, grpcPort)
	}
	if p := containerPort(t, c, intstr.FromString("http")); p != httpPort {
		t.Errorf("container port http %d, the config serves http on %d", p, httpPort)
	}
	// Readiness: the gRPC health of the server (the kubelet's gRPC probe is plaintext
	// only), or GET /readyz on the http port, which answers the same.
	rp := c.ReadinessProbe
	grpcReady := rp != nil && rp.GRPC != nil && rp.GRPC.Port == grpcPort && (rp.GRPC.Service == nil || *rp.GRPC.Service == "")
	httpReady := rp != nil && rp.HTTPGet != nil && rp.HTTPGet.Path == "/readyz" && containerPort(t, c, rp.HTTPGet.Port) == httpPort
	switch {
	case grpcReady && !cfg.Insecure:
		t.Errorf("player readiness %+v: the kubelet's gRPC probe cannot reach a TLS server: want GET /readyz on the http port", rp)
	case !grpcReady && !httpReady:
		t.Errorf("player readiness %+v: want the gRPC health of the server on %d or GET /readyz on the http port", rp, grpcPort)
	}
	lp := c.LivenessProbe
	if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/livez" || containerPort(t, c, lp.HTTPGet.Port) != httpPort {
		t.Errorf("player liveness %+v: want GET /livez on the http port", lp)
	}
	if overlay == "production" {
		// TLS and the clients' tokens, each file from a mounted Secret.
		if cfg.Insecure || !cfg.TLS.Enabled() || !cfg.Tokens.Enabled() || cfg.Tokens.File == "" {
			t.Errorf("production player: insecure %v, tls %+v, tokens %+v: want TLS and a tokens file", cfg.Insecure, cfg.TLS, cfg.Tokens)
		}
		for _, f := range []string{cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.Tokens.File} {
			if secret, key := secretFile(d, f); secret == "" {
				t.Errorf("production player: %s is not in a mounted Secret", f)
			} else if f == cfg.TLS.CertFile && key != corev1.TLSCertKey || f == cfg.TLS.KeyFile && key != corev1.TLSPrivateKeyKey {
				t.Errorf("production player: %s is key %s of Secret %s: want a kubernetes.io/tls Secret's %s and %s (cert-manager's)", f, key, secret, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			}
		}
	}
	checkMemory(t, d, playerLive(sizing(t, d), len(cfg.Streams), cfg))

	h, ok := o.Services["player-headless"]
	if !ok {
		t.Fatal("no player-headless Service")
	}
	if h.Spec.ClusterIP != corev1.ClusterIPNone || h.Spec.PublishNotReadyAddresses || !matches(t, &metav1.LabelSelector{MatchLabels: h.Spec.Selector}, d.Spec.Template.Labels) {
		t.Errorf("player-headless: want a headless Service of the ready players: %+v", h.Spec)
	}
	if len(h.Spec.Ports) != 1 || h.Spec.Ports[0].Port != grpcPort || containerPort(t, c, h.Spec.Ports[0].TargetPort) != grpcPort {
		t.Errorf("player-headless ports %+v: want the gRPC port %d (dns:///player-headless:%d)", h.Spec.Ports, grpcPort, grpcPort)
	}
	np, ok := o.NetworkPolicies["player"]
	if !ok || !matches(t, &np.Spec.PodSelector, d.Spec.Template.Labels) {
		t.Fatalf("no NetworkPolicy over the players")
	}
	var allowed []int32
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			allowed = append(allowed, containerPort(t, c, *p.Port))
		}
	}
	if slices.Sort(allowed); !slices.Equal(allowed, []int32{grpcPort, httpPort}) {
		t.Errorf("player NetworkPolicy allows ports %v, want %d and %d", allowed, grpcPort, httpPort)
	}
}

// secretFile returns the Secret and its key that the player's container sees at path
// (a Secret volume mounted read-only at the path's directory), or "", "".
func secretFile(d appsv1.Deployment, path string) (secret, key string) {
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly || !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName, strings.TrimPrefix(path, m.MountPath+"/")
			}
		}
	}
	return "", ""
}

func checkDistributor(t *testing.T, overlay string, o objects) {
	d, ok := o.Deployments["distributor"]
	if !ok {
		t.Fatal("no distributor Deployment")
	}
	checkPod(t, o, d, "distributor")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("distributor replicas %d, want 2 (active and standby)", replicas(d))
	}
	cfg, _ := loadConfig(t, o, d, distributor.LoadConfig)
	c := d.Spec.Template.Spec.Containers[0]
	httpPort := portOf(t, cfg.HTTPAddr)
	if p := containerPort(t, c, intstr.FromString("http")); p != httpPort {
		t.Errorf("container port http %d, the config serves http on %d", p, httpPort)
	}
	for name, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/livez": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || containerPort(t, c, p.HTTPGet.Port) != httpPort {
			t.Errorf("distributor probe %+v: want GET %s on the http port", p, name)
		}
	}
	checkMemory(t, d, distributorLive(sizing(t, d)))
	brokers := podEnv(t, o, c, testSecrets)["STATECAST_KAFKA_BROKERS"]

	// one KafkaTopic per stream, as the distributor requires it and the operations doc says
	topics := map[string]KafkaTopic{}
	for _, kt := range o.Topics {
		topics[kt.Spec.TopicName] = kt
	}
	for _, s := range cfg.Streams {
		kt, ok := topics[s.Topic]
		if !ok {
			t.Errorf("stream %s has no KafkaTopic", s.Topic)
			continue
		}
		cluster := kt.Metadata.Labels["strimzi.io/cluster"]
		if cluster == "" || !strings.HasPrefix(brokers, cluster+"-kafka-bootstrap:") {
			t.Errorf("KafkaTopic %s belongs to cluster %q, the brokers are %s", kt.Metadata.Name, cluster, brokers)
		}
		want := map[string]string{
			"cleanup.policy":        "compact",
			"delete.retention.ms":   strconv.FormatInt(s.DeleteRetention.Milliseconds(), 10),
			"segment.ms":            strconv.FormatInt(s.Segment.Milliseconds(), 10),
			"min.compaction.lag.ms": strconv.FormatInt(s.MinCompactionLag.Milliseconds(), 10),
			"min.insync.replicas":   "2",
		}
		replicas := int32(3)
		if overlay == "dev" {
			want["min.insync.replicas"], replicas = "1", 1
		}
		got := map[string]string{}
		for k, v := range kt.Spec.Config {
			got[k] = fmt.Sprint(v)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("KafkaTopic %s: %s = %q, want %q", kt.Metadata.Name, k, got[k], v)
			}
		}
		if kt.Spec.Partitions != 1 || kt.Spec.Replicas != replicas {
			t.Errorf("KafkaTopic %s: %d partitions, %d replicas; want 1, %d", kt.Metadata.Name, kt.Spec.Partitions, kt.Spec.Replicas, replicas)
		}
		if overlay == "production" && int32(s.ReplicationFactor) != kt.Spec.Replicas {
			t.Errorf("stream %s: replication_factor %d, the KafkaTopic %d", s.Topic, s.ReplicationFactor, kt.Spec.Replicas)
		}
		if s.DeleteRetention < 24*time.Hour {
			t.Errorf("stream %s: delete retention %v: shorter than a day", s.Topic, s.DeleteRetention)
		}
	}
	np, ok := o.NetworkPolicies["distributor"]
	if !ok || !matches(t, &np.Spec.PodSelector, d.Spec.Template.Labels) {
		t.Fatal("no NetworkPolicy over the distributors")
	}
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if containerPort(t, c, *p.Port) != httpPort {
				t.Errorf("distributor NetworkPolicy allows port %v", p.Port)
			}
		}
	}
}

// checkMonitoring: the ServiceMonitor's Services are those of every player and
// distributor pod, and name their metrics port.
func checkMonitoring(t *testing.T, o objects) {
	m := o.Monitors[0]
	scraped := map[string]bool{}
	for name, s := range o.Services {
		if !matches(t, &m.Spec.Selector, s.Labels) {
			continue
		}
		for _, d := range o.Deployments {
			if !matches(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, d.Spec.Template.Labels) {
				continue
			}
			scraped[d.Name] = true
			c := d.Spec.Template.Spec.Containers[0]
			for _, ep := range m.Spec.Endpoints {
				var ok bool
				for _, sp := range s.Spec.Ports {
					ok = ok || sp.Name == ep.Port && containerPort(t, c, sp.TargetPort) > 0
				}
				if !ok || ep.Path != "/metrics" {
					t.Errorf("ServiceMonitor endpoint %+v: Service %s has no such port", ep, name)
				}
			}
			if name == "player-metrics" && !s.Spec.PublishNotReadyAddresses {
				t.Errorf("player-metrics leaves out the players still catching up")
			}
		}
	}
	for name := range o.Deployments {
		if !scraped[name] {
			t.Errorf("ServiceMonitor does not scrape %s", name)
		}
	}
}
