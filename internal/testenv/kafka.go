package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statecast/statecast/kafkaconn"
)

// Kafka is a dedicated real broker started for one test by deploy/local/kafka.sh with its
// own state directory, so the test may pause it without disturbing the shared broker that
// other packages' tests use. It is stopped (and resumed first, if paused) at the test's end.
type Kafka struct {
	Brokers []string
	// SASL is the connection to its SASL_SSL listener (as KafkaSASL's).
	SASL   kafkaconn.Config
	dir    string // $STATECAST_RUN of this broker
	script string
}

var (
	brokersLine = regexp.MustCompile(`STATECAST_KAFKA_BROKERS='([^']+)'`)
	envLine     = regexp.MustCompile(`export (STATECAST_KAFKA_SASL_[A-Z]+)='([^']*)'`)
)

// DedicatedKafka starts a private broker (about 10-20 s: a JVM start on cached jars). Outside
// CI it skips when java, the script or the cached jars are missing; under CI it fails.
func DedicatedKafka(t testing.TB) *Kafka {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		skipOrFail(t, "testenv: dedicated Kafka needs java: %v", err)
	}
	k := &Kafka{dir: t.TempDir()}
	var out string
	k.script, out = startScript(t, "kafka.sh", k.stop, "STATECAST_RUN="+k.dir)
	m := brokersLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("testenv: %s start printed no STATECAST_KAFKA_BROKERS:\n%s", k.script, out)
	}
	k.Brokers = strings.Split(m[1], ",")
	vals := map[string]string{}
	for _, m := range envLine.FindAllStringSubmatch(out, -1) {
		vals[m[1]] = m[2]
	}
	if vals[EnvKafkaSASLBrokers] == "" {
		t.Fatalf("testenv: %s start printed no %s:\n%s", k.script, EnvKafkaSASLBrokers, out)
	}
	k.SASL = saslConfig(t, vals[EnvKafkaSASLBrokers], vals[EnvKafkaSASLCA], vals[EnvKafkaSASLMechanism], vals[EnvKafkaSASLUser], vals[EnvKafkaSASLPassword])
	return k
}

// skipOrFail skips the test outside CI, fails it under CI (a missing server must not pass
// as green there).
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// startScript runs deploy/local/<name> start with env added and returns the script's
// path and what it printed; stop is registered as a cleanup first (a half-started server
// is stopped too).
func startScript(t testing.TB, name string, stop func(), env ...string) (script, out string) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		skipOrFail(t, "testenv: %s: %v", name, err)
	}
	script = filepath.Join(root, "deploy", "local", name)
	if _, err := os.Stat(script); err != nil {
		skipOrFail(t, "testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "start")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(stop)
	if err := cmd.Run(); err != nil {
		skipOrFail(t, "testenv: %s start: %v\n%s", script, err, stderr.String())
	}
	return script, stdout.String() + stderr.String()
}

// PID is the broker's process id.
func (k *Kafka) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(k.dir, "kafka", "kafka.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Pause stops the broker process (SIGSTOP): its sockets stay open but nothing answers.
func (k *Kafka) Pause(t testing.TB) { t.Helper(); k.signal(t, syscall.SIGSTOP) }

// Resume continues a paused broker (SIGCONT).
func (k *Kafka) Resume(t testing.TB) { t.Helper(); k.signal(t, syscall.SIGCONT) }

func (k *Kafka) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	pid, err := k.PID()
	if err != nil {
		t.Fatalf("testenv: kafka pid: %v", err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("testenv: kill -%v %d: %v", sig, pid, err)
	}
}

// Restart stops the broker gracefully and starts it again with its data, config and port
// (deploy/local/kafka.sh restart); Brokers stay valid.
func (k *Kafka) Restart(t testing.TB) {
	t.Helper()
	k.script1(t, "restart")
}

// Kill ends the broker with SIGKILL (a crash); Start brings it back with its data.
func (k *Kafka) Kill(t testing.TB) {
	t.Helper()
	k.signal(t, syscall.SIGKILL)
	for range 100 {
		if pid, err := k.PID(); err != nil || syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("testenv: kafka still running after SIGKILL")
}

// Start starts a stopped or killed broker again with its data, config and port.
func (k *Kafka) Start(t testing.TB) {
	t.Helper()
	out := k.script1(t, "start")
	if m := brokersLine.FindStringSubmatch(out); m == nil || strings.Join(k.Brokers, ",") != m[1] {
		t.Fatalf("testenv: kafka started on other addresses than %v:\n%s", k.Brokers, out)
	}
}

func (k *Kafka) script1(t testing.TB, command string) string {
	t.Helper()
	return runScript(t, k.script, command, "STATECAST_RUN="+k.dir)
}

// runScript runs a deploy/local script's command with env added and returns its output.
func runScript(t testing.TB, script, command string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, command)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: %s %s: %v\n%s", script, command, err, out)
	}
	return string(out)
}

func (k *Kafka) stop() {
	if pid, err := k.PID(); err == nil {
		_ = syscall.Kill(pid, syscall.SIGCONT) // a paused JVM cannot handle SIGTERM
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", k.script, "stop")
	cmd.Env = append(os.Environ(), "STATECAST_RUN="+k.dir)
	_ = cmd.Run()
}

// repoRoot walks up from the working directory to the repository's root: the directory
// whose go.mod is the module github.com/statecast/statecast. The go.mod of a nested
// module on the way (deploy/, cacheclient/e2e/) is passed over.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isRootModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/statecast/statecast above the working directory")
		}
		dir = parent
	}
}

// isRootModule reports whether gomod's module line names github.com/statecast/statecast.
func isRootModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == "github.com/statecast/statecast"
		}
	}
	return false
}

// Postgres is a dedicated PostgreSQL cluster started for one test by
// deploy/local/postgres.sh with its own data directory and settings, so that a test may
// change what it must (a setting, a restart) without disturbing the shared server.
type Postgres struct {
	DSN    string // its postgres database
	dir    string // $STATECAST_RUN of this cluster
	data   string
	script string
}

var dsnLine = regexp.MustCompile(`STATECAST_PG_DSN='([^']+)'`)

// DedicatedPostgres starts a private cluster (a few seconds: initdb and a start) with conf
// added to its postgresql.conf. It is stopped and removed at the test's end.
func DedicatedPostgres(t testing.TB, conf ...string) *Postgres {
	t.Helper()
	p := &Postgres{dir: t.TempDir(), data: filepath.Join(os.TempDir(), UniqueName("statecast-pg-test"))}
	var out string
	p.script, out = startScript(t, "postgres.sh", p.stop,
		"STATECAST_RUN="+p.dir, "STATECAST_PGDATA="+p.data, "STATECAST_PG_EXTRA_CONF="+strings.Join(conf, "\n"))
	m := dsnLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("testenv: %s start printed no STATECAST_PG_DSN:\n%s", p.script, out)
	}
	p.DSN = m[1]
	return p
}

// Restart stops the cluster (a fast shutdown) and starts it again with its data on the same
// port (deploy/local/postgres.sh restart); DSN stays valid.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	out := runScript(t, p.script, "restart", p.env()...)
	if m := dsnLine.FindStringSubmatch(out); m == nil || m[1] != p.DSN {
		t.Fatalf("testenv: postgres restarted with another DSN than %s:\n%s", p.DSN, out)
	}
}

func (p *Postgres) env() []string {
	return []string{"STATECAST_RUN=" + p.dir, "STATECAST_PGDATA=" + p.data}
}

func (p *Postgres) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", p.script, "stop")
	cmd.Env = append(os.Environ(), "STATECAST_RUN="+p.dir, "STATECAST_PGDATA="+p.data)
	_ = cmd.Run()
	_ = os.RemoveAll(p.data)
	_ = os.Remove(p.data + ".initdb.log")
}
