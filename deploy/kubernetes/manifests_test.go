package kubernetes

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/statecast/statecast/deploy/internal/ociimage"
	"github.com/statecast/statecast/deploy/internal/promcheck"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
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

// testSecrets stand for the Secrets' keys that the pods take as environment variables
// (the manifests only refer to them): the DSN an operator creates, the KafkaUsers'
// passwords that Strimzi's User Operator writes.
var testSecrets = map[string]string{
	"statecast-postgres/dsn":         "postgres://statecast:secret@postgres.example:5432/statecast?sslmode=require",
	"statecast-distributor/password": "a-password-of-the-distributor",
	"statecast-player/password":      "a-password-of-the-player",
}

// mountSecrets emulates the Secret volumes of d's container: a directory each, holding the
// files of files (secret/key: body) as the volume maps its keys (all of them, or its
// items at their paths); the paths under each mount point in text are moved there.
func mountSecrets(t *testing.T, d appsv1.Deployment, text string, files map[string]string) string {
	t.Helper()
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			dir := t.TempDir()
			for k, body := range files {
				name, key, _ := strings.Cut(k, "/")
				if name != v.Secret.SecretName {
					continue
				}
				path := key
				if len(v.Secret.Items) > 0 {
					path = ""
					for _, it := range v.Secret.Items {
						if it.Key == key {
							path = it.Path
						}
					}
				}
				if path == "" {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, path), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			text = strings.ReplaceAll(text, m.MountPath+"/", dir+"/")
		}
	}
	return text
}

// loadConfig writes the Deployment's mounted config file to a directory, with the files of
// its Secret volumes (secretFiles), resolves its environment and loads it with the binary's
// own loader. It returns the config and the file as the ConfigMap holds it.
func loadConfig[C any](t *testing.T, o objects, d appsv1.Deployment, load func(string) (*C, error)) (*C, string) {
	t.Helper()
	cm, key, _ := configOf(t, o, d)
	text := mountSecrets(t, d, cm.Data[key], secretFiles(t))
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	withEnv(t, text, podEnv(t, o, d.Spec.Template.Spec.Containers[0], testSecrets))
	c, err := load(path)
	if err != nil {
		t.Fatalf("%s: %s: %v", d.Name, key, err)
	}
	return c, cm.Data[key]
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
			// production adds the Grafana dashboard's ConfigMap and the Kafka users
			configMaps, users := 3, 0
			if overlay == "production" {
				configMaps, users = 4, 2
			}
			if len(o.Namespaces) != 1 || len(o.Deployments) != 2 || len(o.Services) != 3 || len(o.PDBs) != 2 ||
				len(o.NetworkPolicies) != 2 || len(o.Topics) != 1 || len(o.Monitors) != 1 || len(o.ConfigMaps) != configMaps || len(o.Users) != users {
				t.Fatalf("objects: %d namespaces, %d deployments, %d services, %d PDBs, %d network policies, %d topics, %d monitors, %d config maps, %d Kafka users",
					len(o.Namespaces), len(o.Deployments), len(o.Services), len(o.PDBs), len(o.NetworkPolicies), len(o.Topics), len(o.Monitors), len(o.ConfigMaps), len(o.Users))
			}
			checkPlayer(t, overlay, o)
			checkDistributor(t, overlay, o)
			checkMonitoring(t, o)
			checkImages(t, overlay, o)
			if overlay == "production" {
				checkDashboard(t, o)
				checkSameStreams(t, o)
			}
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
	cfg, raw := loadConfig(t, o, d, player.LoadConfig)
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
		// The paths as the file names them (the loaded config's are the test's copies).
		var files struct {
			TLS struct {
				CertFile string `yaml:"cert_file"`
				KeyFile  string `yaml:"key_file"`
			} `yaml:"tls"`
			Tokens struct {
				File string `yaml:"file"`
			} `yaml:"tokens"`
		}
		if err := yaml.Unmarshal([]byte(raw), &files); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{files.TLS.CertFile, files.TLS.KeyFile, files.Tokens.File} {
			if secret, key := secretFile(d, f); secret == "" {
				t.Errorf("production player: %s is not in a mounted Secret", f)
			} else if f == files.TLS.CertFile && key != corev1.TLSCertKey || f == files.TLS.KeyFile && key != corev1.TLSPrivateKeyKey {
				t.Errorf("production player: %s is key %s of Secret %s: want a kubernetes.io/tls Secret's %s and %s (cert-manager's)", f, key, secret, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			}
		}
	}
	if overlay == "production" {
		// Access rules: the sportsbook service's principal (its line in the tokens Secret)
		// is granted every stream; TestProbesAgainstBinaries subscribes with its token,
		// and with one of a principal without a grant.
		if len(cfg.Access) == 0 {
			t.Error("production player: no access rules: every token reads every stream")
		}
		for _, s := range cfg.Streams {
			granted := false
			for _, g := range cfg.Access {
				granted = granted || matchAny(g.Principals, "sportsbook") && matchAny(g.Streams, s.Name) && matchAny(g.Views, "*")
			}
			if !granted {
				t.Errorf("production player: the sportsbook principal is not granted every view of stream %s", s.Name)
			}
		}
		checkKafka(t, o, d, cfg.Kafka)
		for _, s := range cfg.Streams {
			checkACL(t, o, d, "topic", s.Topic, "Describe", "DescribeConfigs", "Read")
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
	checkEgress(t, o, d, np, 0)
}

// secretFile returns the Secret and its key that the player's container sees at path
// (a Secret volume mounted read-only at the path's directory), or "", "".
func secretFile(d appsv1.Deployment, path string) (secret, key string) {
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly || !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			rel := strings.TrimPrefix(path, m.MountPath+"/")
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key
				}
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
	if overlay == "production" {
		checkKafka(t, o, d, cfg.Kafka.Config)
		for _, s := range cfg.Streams {
			checkACL(t, o, d, "topic", s.Topic, "Create", "Describe", "DescribeConfigs", "Read", "Write")
			checkACL(t, o, d, "transactionalId", s.TransactionalID, "Describe", "Write")
		}
		checkACL(t, o, d, "cluster", "kafka-cluster", "IdempotentWrite")
	}

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
	dsn, err := pgx.ParseConfig(cfg.Postgres.DSN)
	if err != nil {
		t.Fatal(err)
	}
	checkEgress(t, o, d, np, int32(dsn.Port))
}

// checkMonitoring: the ServiceMonitor's Services are those of every player and
// distributor pod, and name their metrics port.
func checkMonitoring(t *testing.T, o objects) {
	m := o.Monitors[0]
	// kube-prometheus-stack's Prometheus selects ServiceMonitors by its release's label.
	if m.Metadata.Labels["release"] == "" {
		t.Errorf("ServiceMonitor labels %v: no release label, which kube-prometheus-stack selects on", m.Metadata.Labels)
	}
	// A metric label that the operator also sets on every target would be renamed
	// exported_<name> unless the endpoint honours the scraped labels.
	metrics, err := promcheck.Registered()
	if err != nil {
		t.Fatal(err)
	}
	for _, metric := range metrics {
		for _, l := range metric.Labels {
			if !slices.Contains(operatorTargetLabels, l) {
				continue
			}
			for _, ep := range m.Spec.Endpoints {
				if !ep.HonorLabels {
					t.Errorf("ServiceMonitor endpoint %s: %s has a label %q, which the operator sets on the target too: honorLabels keeps the metric's", ep.Port, metric.Name, l)
				}
			}
		}
	}
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

// operatorTargetLabels are the labels the Prometheus Operator gives every target of a
// ServiceMonitor.
var operatorTargetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// rawKafka is the kafka block of a config file as written (before ${} and the mounts).
type rawKafka struct {
	Kafka struct {
		TLS struct {
			Enabled bool   `yaml:"enabled"`
			CAFile  string `yaml:"ca_file"`
		} `yaml:"tls"`
		SASL struct {
			Mechanism string `yaml:"mechanism"`
			User      string `yaml:"user"`
			Password  string `yaml:"password"`
		} `yaml:"sasl"`
	} `yaml:"kafka"`
}

// checkKafka: the config (loaded: k) reaches Kafka over TLS, verifying the brokers with the
// CA of the Strimzi cluster from its Secret (<cluster>-cluster-ca-cert, ca.crt, mounted
// read-only), and authenticates with SCRAM-SHA-512 as a KafkaUser of the rendering, of that
// cluster, whose password comes from the Secret the User Operator writes for it (its key
// password, through an environment variable the file names).
func checkKafka(t *testing.T, o objects, d appsv1.Deployment, k kafkaconn.Config) {
	t.Helper()
	cm, key, _ := configOf(t, o, d)
	var raw rawKafka
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &raw); err != nil {
		t.Fatal(err)
	}
	cluster := o.Topics[0].Metadata.Labels["strimzi.io/cluster"]
	if !k.TLS.Enabled || k.TLS.InsecureSkipVerify || raw.Kafka.TLS.CAFile == "" {
		t.Errorf("%s: kafka.tls %+v: want TLS verified with the cluster's CA", d.Name, k.TLS)
	} else if secret, skey := secretFile(d, raw.Kafka.TLS.CAFile); secret != cluster+"-cluster-ca-cert" || skey != "ca.crt" {
		t.Errorf("%s: kafka.tls.ca_file %s is %q of Secret %q: want ca.crt of Strimzi's %s-cluster-ca-cert", d.Name, raw.Kafka.TLS.CAFile, skey, secret, cluster)
	}
	if k.SASL.Mechanism != kafkaconn.SASLScramSHA512 {
		t.Errorf("%s: kafka.sasl.mechanism %q, want %s (the KafkaUser's authentication)", d.Name, k.SASL.Mechanism, kafkaconn.SASLScramSHA512)
	}
	u, ok := o.Users[k.SASL.User]
	if !ok || u.Spec.Authentication.Type != "scram-sha-512" || u.Metadata.Labels["strimzi.io/cluster"] != cluster {
		t.Errorf("%s: kafka.sasl.user %q is not a scram-sha-512 KafkaUser of cluster %s in the rendering", d.Name, k.SASL.User, cluster)
	}
	m := envRef.FindStringSubmatch(raw.Kafka.SASL.Password)
	if m == nil || m[0] != raw.Kafka.SASL.Password {
		t.Errorf("%s: kafka.sasl.password %q: want ${VARIABLE}, from the user's Secret", d.Name, raw.Kafka.SASL.Password)
		return
	}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name != m[1] {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != k.SASL.User || e.ValueFrom.SecretKeyRef.Key != "password" {
			t.Errorf("%s: %s is %+v: want the key password of the Secret %s (Strimzi's User Operator writes it)", d.Name, e.Name, e.ValueFrom, k.SASL.User)
		}
		return
	}
	t.Errorf("%s: the config's password %s is not in the container's environment", d.Name, raw.Kafka.SASL.Password)
}

// checkACL: the KafkaUser of d's config allows ops on the resource (a topic, a
// transactionalId or the cluster) named name, by a literal or a prefixed pattern.
func checkACL(t *testing.T, o objects, d appsv1.Deployment, resource, name string, ops ...string) {
	t.Helper()
	cm, key, _ := configOf(t, o, d)
	var raw rawKafka
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &raw); err != nil {
		t.Fatal(err)
	}
	u := o.Users[raw.Kafka.SASL.User]
	if u.Spec.Authorization.Type != "simple" {
		t.Errorf("KafkaUser %s: authorization %q, want simple (ACLs)", u.Metadata.Name, u.Spec.Authorization.Type)
	}
	for _, op := range ops {
		allowed := false
		for _, acl := range u.Spec.Authorization.ACLs {
			r := acl.Resource
			match := r.Type == resource && (resource == "cluster" ||
				(r.PatternType == "" || r.PatternType == "literal") && (r.Name == name || r.Name == "*") ||
				r.PatternType == "prefix" && strings.HasPrefix(name, r.Name))
			if match && (slices.Contains(acl.Operations, op) || slices.Contains(acl.Operations, "All")) && (acl.Host == "" || acl.Host == "*") {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("KafkaUser %s (%s) may not %s %s %q", u.Metadata.Name, d.Name, op, resource, name)
		}
	}
}

// checkEgress: d's NetworkPolicy restricts egress to what its config reaches: the cluster's
// DNS (53, UDP and TCP, to kube-dns in kube-system), the Kafka brokers' port (of the
// statecast-kafka ConfigMap's brokers) on the Strimzi cluster's broker pods and, with
// pgPort, PostgreSQL's.
func checkEgress(t *testing.T, o objects, d appsv1.Deployment, np networkingv1.NetworkPolicy, pgPort int32) {
	t.Helper()
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy %s does not restrict egress (policyTypes %v)", np.Name, np.Spec.PolicyTypes)
	}
	c := d.Spec.Template.Spec.Containers[0]
	kafkaPort := portOf(t, podEnv(t, o, c, testSecrets)["STATECAST_KAFKA_BROKERS"])
	cluster := o.Topics[0].Metadata.Labels["strimzi.io/cluster"]
	want := map[string]string{"53/UDP": "dns", "53/TCP": "dns", fmt.Sprintf("%d/TCP", kafkaPort): "kafka"}
	if pgPort != 0 {
		want[fmt.Sprintf("%d/TCP", pgPort)] = "postgres"
	}
	brokerPod := map[string]string{"strimzi.io/cluster": cluster, "strimzi.io/kind": "Kafka", "strimzi.io/broker-role": "true"}
	got := map[string]string{}
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			k := fmt.Sprintf("%s/%s", p.Port.String(), proto)
			got[k] = want[k]
			switch want[k] {
			case "":
				t.Errorf("NetworkPolicy %s allows egress to port %s, which %s's config does not reach", np.Name, k, d.Name)
			case "dns":
				if len(r.To) != 1 || r.To[0].PodSelector == nil || r.To[0].NamespaceSelector == nil ||
					!matches(t, r.To[0].PodSelector, map[string]string{"k8s-app": "kube-dns"}) ||
					!matches(t, r.To[0].NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": "kube-system"}) {
					t.Errorf("NetworkPolicy %s: DNS egress to %+v, want kube-dns in kube-system", np.Name, r.To)
				}
			case "kafka":
				if len(r.To) != 1 || r.To[0].PodSelector == nil || !matches(t, r.To[0].PodSelector, brokerPod) {
					t.Errorf("NetworkPolicy %s: Kafka egress to %+v, want the broker pods of Strimzi's cluster %s", np.Name, r.To, cluster)
				}
			case "postgres":
				if len(r.To) == 0 {
					t.Errorf("NetworkPolicy %s: PostgreSQL egress to anywhere", np.Name)
				}
			}
		}
	}
	for k, what := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("NetworkPolicy %s allows no egress to %s (%s), which %s reaches", np.Name, k, what, d.Name)
		}
	}
}

// releaseTag is a release's version: the tag make images gives a release's images.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// checkImages: every container runs an image as make images names and tags it:
// statecast/<name> (a registry before it is the overlay's to set) with a tag that
// ociimage.Spec.Tags gives a build, and in production a release's version, never latest.
func checkImages(t *testing.T, overlay string, o objects) {
	t.Helper()
	for _, d := range o.Deployments {
		c := d.Spec.Template.Spec.Containers[0]
		ref, err := name.NewTag(c.Image)
		if last := c.Image[strings.LastIndex(c.Image, "/")+1:]; err != nil || !strings.Contains(last, ":") {
			t.Errorf("%s: image %q: want an explicit tag (%v)", d.Name, c.Image, err)
			continue
		}
		spec, ok := ociimage.Lookup(d.Name)
		if !ok {
			t.Fatalf("no image spec %s", d.Name)
		}
		tags, err := spec.Tags(ociimage.Build{Version: ref.TagStr()})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tg := range tags {
			names = append(names, tg.RepositoryStr()+":"+tg.TagStr())
		}
		// The repository without its registry: that is the overlay's to set (newName).
		if got := ref.RepositoryStr() + ":" + ref.TagStr(); !slices.Contains(names, got) {
			t.Errorf("%s: image %s is none make images tags (%v)", d.Name, c.Image, names)
		}
		if overlay == "production" && !releaseTag.MatchString(ref.TagStr()) {
			t.Errorf("%s: image %s: production runs a release (vMAJOR.MINOR.PATCH), not %q", d.Name, c.Image, ref.TagStr())
		}
	}
}

// checkDashboard: the Grafana dashboard is a ConfigMap that the Grafana sidecar loads
// (label grafana_dashboard: "1"), holding deploy/grafana/statecast.json as it is.
func checkDashboard(t *testing.T, o objects) {
	t.Helper()
	want, err := os.ReadFile("../grafana/statecast.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range o.ConfigMaps {
		if cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		if cm.Data["statecast.json"] != string(want) {
			t.Errorf("ConfigMap %s does not hold deploy/grafana/statecast.json", cm.Name)
		}
		var d struct {
			UID string `json:"uid"`
		}
		if err := json.Unmarshal([]byte(cm.Data["statecast.json"]), &d); err != nil || d.UID == "" {
			t.Errorf("ConfigMap %s: the dashboard: %v, uid %q", cm.Name, err, d.UID)
		}
		return
	}
	t.Error(`no ConfigMap labelled grafana_dashboard: "1" (the Grafana sidecar's) in the production overlay`)
}

// checkSameStreams: the configs production replaces (for its Kafka settings) publish and
// serve the base's streams, so that the two cannot drift apart.
func checkSameStreams(t *testing.T, o objects) {
	t.Helper()
	base := decodeAll(t, renderDir(t, "base"))
	for _, name := range []string{"distributor", "player"} {
		cm, key, _ := configOf(t, o, o.Deployments[name])
		bcm, bkey, _ := configOf(t, base, base.Deployments[name])
		var a, b struct {
			Streams any `yaml:"streams"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data[key]), &a); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(bcm.Data[bkey]), &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Streams, b.Streams) {
			t.Errorf("the production %s config's streams differ from the base's:\n%v\nbase:\n%v", name, a.Streams, b.Streams)
		}
	}
}

// matchAny reports whether one of the access rule's patterns (path.Match) matches s.
func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}
