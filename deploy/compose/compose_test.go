// Package compose holds deploy/compose (compose.yaml and the files it mounts); its test
// loads the project as docker compose does and checks it against the binaries.
package compose

import (
	"context"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/deploy/internal/ociimage"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/player"
)

func load(t *testing.T) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	// No environment but compose.yaml's own defaults: what a fresh shell gets.
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithEnv(nil), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProject: the services, their images, health checks, start order and ports.
func TestProject(t *testing.T) {
	p := load(t)
	want := []string{"distributor-a", "distributor-b", "kafka", "player-1", "player-2", "postgres", "prometheus", "sportsbook"}
	if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	healthy := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = types.ServiceConditionHealthy
		}
		return m
	}
	deps := map[string]map[string]string{
		"postgres":      {},
		"kafka":         {},
		"distributor-a": healthy("postgres", "kafka"),
		"distributor-b": healthy("postgres", "kafka"),
		"player-1":      healthy("kafka", "distributor-a"),
		"player-2":      healthy("kafka", "distributor-a"),
		"sportsbook":    healthy("postgres", "player-1", "player-2"),
		"prometheus":    {"sportsbook": types.ServiceConditionStarted},
	}
	ports := map[string][]string{
		"postgres":      {"127.0.0.1:15432->5432"},
		"kafka":         {"127.0.0.1:19092->19092"},
		"distributor-a": {"127.0.0.1:9102->9102", "127.0.0.1:9104->9104"},
		"distributor-b": {"127.0.0.1:9103->9102", "127.0.0.1:9105->9104"},
		"player-1":      {"127.0.0.1:7070->7070", "127.0.0.1:7071->7071", "127.0.0.1:7072->7072"},
		"player-2":      {"127.0.0.1:7170->7070", "127.0.0.1:7171->7071", "127.0.0.1:7172->7072"},
		"sportsbook":    {"127.0.0.1:8080->8080"},
		"prometheus":    {"127.0.0.1:9090->9090"},
	}
	for name, s := range p.Services {
		if s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Disable {
			t.Errorf("%s: no health check", name)
		}
		got := map[string]string{}
		for d, dep := range s.DependsOn {
			got[d] = dep.Condition
		}
		if !reflect.DeepEqual(got, deps[name]) {
			t.Errorf("%s: depends_on %v, want %v", name, got, deps[name])
		}
		var ps []string
		for _, pc := range s.Ports {
			ps = append(ps, pc.HostIP+":"+pc.Published+"->"+strconv.Itoa(int(pc.Target)))
		}
		if !slices.Equal(ps, ports[name]) {
			t.Errorf("%s: ports %v, want %v", name, ps, ports[name])
		}
	}
	if img := p.Services["postgres"].Image; !strings.HasPrefix(img, "postgres:") {
		t.Errorf("postgres image %s", img)
	}
	if img := p.Services["kafka"].Image; !strings.HasPrefix(img, "apache/kafka:") {
		t.Errorf("kafka image %s, want the official apache/kafka", img)
	}
	if pg := p.Services["postgres"]; !slices.Contains(pg.Command, "wal_level=logical") {
		t.Errorf("postgres command %q: no wal_level=logical", pg.Command)
	}
	k := p.Services["kafka"].Environment
	if v := k["KAFKA_PROCESS_ROLES"]; v == nil || *v != "broker,controller" {
		t.Errorf("kafka is not a one-node KRaft broker and controller: %v", v)
	}
	schema, err := filepath.Abs("../../examples/sportsbook/demo/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Services["postgres"].Volumes; len(v) != 1 || v[0].Source != schema || !strings.HasPrefix(v[0].Target, "/docker-entrypoint-initdb.d/") || !v[0].ReadOnly {
		t.Errorf("postgres volumes %+v: want the demo's schema.sql as an init script", v)
	}
	root, err := ociimage.RootModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		bin := imageOf(name)
		if bin == "" {
			continue
		}
		spec, _ := ociimage.Lookup(bin)
		if !strings.HasPrefix(s.Image, "statecast/"+bin+":") {
			t.Errorf("%s: image %s", name, s.Image)
		}
		if s.Build == nil || s.Build.Context != root || s.Build.Target != bin {
			t.Errorf("%s: build %+v, want the repository's Dockerfile, target %s", name, s.Build, bin)
		}
		if !s.ReadOnly {
			t.Errorf("%s: root file system not read-only", name)
		}
		hc := s.HealthCheck.Test
		if len(hc) != 4 || hc[0] != "CMD" || hc[1] != spec.Entrypoint()[0] || hc[2] != "-probe" {
			t.Errorf("%s: health check %q, want [CMD %s -probe URL] (the image has no shell)", name, hc, spec.Entrypoint()[0])
		}
	}
}

// imageOf names the statecast image a service runs ("" for the others).
func imageOf(service string) string {
	for _, s := range ociimage.Specs {
		if service == s.Name || strings.HasPrefix(service, s.Name+"-") {
			return s.Name
		}
	}
	return ""
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// setEnv makes the process environment what the binary in service s sees for the names
// the config file refers to: the service's environment, and nothing else.
func setEnv(t *testing.T, s types.ServiceConfig, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range envRef.FindAllStringSubmatch(string(b), -1) {
		name := m[1]
		t.Setenv(name, "")
		if v := s.Environment[name]; v != nil {
			t.Setenv(name, *v)
		} else {
			os.Unsetenv(name)
		}
	}
}

// mounted returns the file of the config that s mounts at target.
func mounted(t *testing.T, p *types.Project, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, c := range s.Configs {
		if c.Target == target {
			return p.Configs[c.Source].File
		}
	}
	t.Fatalf("%s mounts nothing at %s", s.Name, target)
	return ""
}

// hostPort parses an address's port (":9102", "kafka:9092").
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return p
}

// probeURL is the URL of a statecast service's -probe health check.
func probeURL(t *testing.T, s types.ServiceConfig) *url.URL {
	t.Helper()
	u, err := url.Parse(s.HealthCheck.Test[len(s.HealthCheck.Test)-1])
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConfigs: every mounted config passes the binary's own validation in the
// environment compose gives it, says what the rest of the project serves (ports, hosts,
// credentials, stream), and the distributor publishes the demo's stream.
func TestConfigs(t *testing.T) {
	p := load(t)
	pg := p.Services["postgres"].Environment
	var distTopic string
	for _, name := range []string{"distributor-a", "distributor-b"} {
		s := p.Services[name]
		spec, _ := ociimage.Lookup("distributor")
		file := mounted(t, p, s, spec.Cmd[1])
		if !slices.Equal(s.Command, spec.Cmd) {
			t.Errorf("%s: command %q, want the image's %q", name, s.Command, spec.Cmd)
		}
		setEnv(t, s, file)
		c, err := distributor.LoadConfig(file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if u := probeURL(t, s); u.Port() != port(t, c.HTTPAddr) || u.Path != "/readyz" {
			t.Errorf("%s: probes %s, serves http on %s", name, u, c.HTTPAddr)
		}
		if !exposes(s, port(t, c.HTTPAddr)) {
			t.Errorf("%s: http_addr %s is not published", name, c.HTTPAddr)
		}
		dsn, err := pgx.ParseConfig(c.Postgres.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if dsn.Host != "postgres" || dsn.Port != 5432 || dsn.Database != *pg["POSTGRES_DB"] || dsn.User != *pg["POSTGRES_USER"] || dsn.Password != *pg["POSTGRES_PASSWORD"] {
			t.Errorf("%s: dsn %s@%s:%d/%s does not reach the postgres service", name, dsn.User, dsn.Host, dsn.Port, dsn.Database)
		}
		checkBrokers(t, p, name, c.Kafka.Brokers)
		checkAdmin(t, s, c.Admin.Addr, daemon.Tokens(c.Admin.Tokens))
		want, err := distributor.ParseConfig(demo.DistributorYAML)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.Streams, want.Streams) {
			t.Errorf("%s: streams differ from examples/sportsbook/demo/distributor.yaml:\n%+v\nwant\n%+v", name, c.Streams, want.Streams)
		}
		distTopic = c.Streams[0].Topic
	}
	if a, b := p.Services["distributor-a"], p.Services["distributor-b"]; a.Configs[0].Source != b.Configs[0].Source || !reflect.DeepEqual(a.Environment, b.Environment) {
		t.Error("the two distributors do not share one config: they would not be active and standby of one stream")
	}

	var players []string
	for _, name := range []string{"player-1", "player-2"} {
		s := p.Services[name]
		spec, _ := ociimage.Lookup("player")
		file := mounted(t, p, s, spec.Cmd[1])
		if !slices.Equal(s.Command, spec.Cmd) {
			t.Errorf("%s: command %q, want the image's %q", name, s.Command, spec.Cmd)
		}
		setEnv(t, s, file)
		c, err := player.LoadConfig(file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if u := probeURL(t, s); u.Scheme != "grpc" || u.Port() != port(t, c.Listen) {
			t.Errorf("%s: probes %s, serves gRPC on %s", name, u, c.Listen)
		}
		if !exposes(s, port(t, c.Listen)) || !exposes(s, port(t, c.HTTPAddr)) {
			t.Errorf("%s: listen %s or http_addr %s not published", name, c.Listen, c.HTTPAddr)
		}
		checkBrokers(t, p, name, c.Kafka.Brokers)
		checkAdmin(t, s, c.Admin.Addr, daemon.Tokens(c.Admin.Tokens))
		if len(c.Streams) != 1 || c.Streams[0].Topic != distTopic || c.Streams[0].Name != demo.Topic {
			t.Errorf("%s: streams %+v, want %s from topic %s", name, c.Streams, demo.Topic, distTopic)
		}
		players = append(players, name+":"+port(t, c.Listen))
	}

	sb := p.Services["sportsbook"]
	args := flags(t, sb.Command)
	if args["-players"] != strings.Join(players, ",") || args["-stream"] != demo.Topic {
		t.Errorf("sportsbook: -players %q -stream %q, want %q %q", args["-players"], args["-stream"], strings.Join(players, ","), demo.Topic)
	}
	if u := probeURL(t, sb); u.Port() != port(t, args["-listen"]) || u.Path != "/readyz" {
		t.Errorf("sportsbook: probes %s, listens on %s", u, args["-listen"])
	}
	if db, err := pgx.ParseConfig(args["-db"]); err != nil || db.Host != "postgres" || db.Database != *pg["POSTGRES_DB"] || db.Password != *pg["POSTGRES_PASSWORD"] {
		t.Errorf("sportsbook: -db %q does not reach the postgres service (%v)", args["-db"], err)
	}

	// Prometheus scrapes every statecast process's metrics address.
	prom := mounted(t, p, p.Services["prometheus"], "/etc/prometheus/prometheus.yml")
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	want := []string{"distributor-a:9102", "distributor-b:9102", "localhost:9090", "player-1:7071", "player-2:7071", "sportsbook:8080"}
	if slices.Sort(targets); !slices.Equal(targets, want) {
		t.Errorf("prometheus targets %v, want %v", targets, want)
	}
}

// readmeToken is the admin token of a fresh shell (STATECAST_ADMIN_TOKEN unset), which
// README.md's curl lines send.
const readmeToken = "statecast-demo-admin"

// checkAdmin: the daemon's admin endpoint (its status page) is reachable from the host —
// it listens beyond the container's loopback and is published, on the host's loopback
// only — and so needs a token, which the environment compose gives it holds: the token
// README.md's curl lines send authenticates, and README.md names the published address.
func checkAdmin(t *testing.T, s types.ServiceConfig, addr string, tokens daemon.Tokens) {
	t.Helper()
	if addr == "" || daemon.IsLoopback(addr) {
		t.Errorf("%s: admin.addr %q: the status page is not reachable from outside the container", s.Name, addr)
		return
	}
	var published string
	for _, pc := range s.Ports {
		if strconv.Itoa(int(pc.Target)) == port(t, addr) {
			published = pc.Published
			if pc.HostIP != "127.0.0.1" {
				t.Errorf("%s: the admin endpoint is published on %q, want the host's loopback only", s.Name, pc.HostIP)
			}
		}
	}
	if published == "" {
		t.Errorf("%s: admin.addr %s is not published", s.Name, addr)
	}
	// The variable the daemon reads its tokens from, as compose sets it (and nothing else).
	if tokens.Env != "" {
		t.Setenv(tokens.Env, "")
		if v := s.Environment[tokens.Env]; v != nil {
			t.Setenv(tokens.Env, *v)
		} else {
			os.Unsetenv(tokens.Env)
		}
	}
	set, err := daemon.LoadTokens(tokens, "admin.tokens")
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	if _, ok := set.Lookup(readmeToken); !ok {
		t.Errorf("%s: the token %q of README.md does not open the admin endpoint", s.Name, readmeToken)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if url := "localhost:" + published + "/status"; !strings.Contains(string(readme), url) {
		t.Errorf("%s: README.md does not say where its status page is (%s)", s.Name, url)
	}
}

func exposes(s types.ServiceConfig, port string) bool {
	for _, p := range s.Ports {
		if strconv.Itoa(int(p.Target)) == port {
			return true
		}
	}
	return false
}

// checkBrokers: the brokers are the kafka service's listener for the other containers.
func checkBrokers(t *testing.T, p *types.Project, name string, brokers []string) {
	t.Helper()
	adv := p.Services["kafka"].Environment["KAFKA_ADVERTISED_LISTENERS"]
	if len(brokers) != 1 || adv == nil || !strings.Contains(*adv, "PLAINTEXT://"+brokers[0]) {
		t.Errorf("%s: brokers %v are not kafka's PLAINTEXT listener (%v)", name, brokers, adv)
	}
}

// flags reads "-name value" pairs.
func flags(t *testing.T, cmd []string) map[string]string {
	t.Helper()
	if len(cmd)%2 != 0 {
		t.Fatalf("command %q is not -flag value pairs", cmd)
	}
	m := map[string]string{}
	for i := 0; i < len(cmd); i += 2 {
		m[cmd[i]] = cmd[i+1]
	}
	return m
}
