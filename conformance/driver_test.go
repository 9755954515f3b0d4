package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// client is one language's driver: how to start a driver process.
type client struct {
	name string
	argv []string
	// without: the scenarios the client cannot run (by name).
	without map[string]bool
}

// supports tells whether the client runs the scenario.
func (c client) supports(scenario string) bool { return !c.without[scenario] }

// driverConfig is the first line a driver reads (doc.go, "Line protocol").
type driverConfig struct {
	Addresses  []string `json:"addresses"`
	Stream     string   `json:"stream"`
	Views      []string `json:"views"`
	InstanceID string   `json:"instance_id,omitempty"`
	Service    string   `json:"service,omitempty"`
	Token      string   `json:"token,omitempty"`
	CAFile     string   `json:"ca_file,omitempty"`
	CertFile   string   `json:"cert_file,omitempty"` // with KeyFile: the client certificate (mutual TLS)
	KeyFile    string   `json:"key_file,omitempty"`  // PKCS #8
	NoListener bool     `json:"no_listener,omitempty"`
	// Selections: by view, the part of it the client holds.
	Selections map[string]driverSelection `json:"selections,omitempty"`
	// StateDir: where the client keeps its state file (none: no state file), written every
	// PersistMillis and at close.
	StateDir      string `json:"state_dir,omitempty"`
	PersistMillis int    `json:"persist_interval_ms,omitempty"`
	// Many: the client subscribes as a channel of a SubscribeMany stream (cacheclient.Many,
	// the Java client's Many).
	Many bool `json:"many,omitempty"`
}

// driverSelection is one view's selection (schemas/proto/README.md, "Selections").
type driverSelection struct {
	Filter     string   `json:"filter,omitempty"`
	ShardIndex uint32   `json:"shard_index,omitempty"`
	ShardCount uint32   `json:"shard_count,omitempty"`
	Columns    []string `json:"columns,omitempty"`
}

// event is one line a driver writes.
type event struct {
	Event   string                       `json:"event"`
	Applied int64                        `json:"applied"`
	Ready   bool                         `json:"ready"`
	Views   map[string]map[string]string `json:"views"`
	View    string                       `json:"view"`
	Key     string                       `json:"key"`
	Old     *string                      `json:"old"`
	New     *string                      `json:"new"`
	Error   string                       `json:"error"`
	LSN     string                       `json:"lsn"`
	Elapsed int64                        `json:"elapsed_ms"`
}

// proc is a running driver process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan event
	stderr *testenv.LockedBuffer

	mu      sync.Mutex
	changes []event
}

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("conformance: no caller information to find the repository")
	}
	return filepath.Dir(filepath.Dir(file))
}

// goClient builds the Go driver once per test binary run.
var (
	goOnce sync.Once
	goBin  string
	goErr  error
)

func goClient(t testing.TB) client {
	goOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conformance-godriver")
		if err != nil {
			goErr = err
			return
		}
		goBin = filepath.Join(dir, "godriver")
		cmd := exec.Command("go", "build", "-o", goBin, "./conformance/godriver")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			goErr = fmt.Errorf("go build ./conformance/godriver: %v\n%s", err, out)
		}
	})
	if goErr != nil {
		t.Fatal(goErr)
	}
	return client{name: "go", argv: []string{goBin}}
}

// javaClient runs the Java driver from the Maven build of clients/java's client module
// (make java builds it; the test builds it when its classes are missing). Without java or
// mvn it skips, and under CI it fails.
var (
	javaOnce sync.Once
	javaErr  error
)

func javaClient(t testing.TB) client { return javaDriver(t, "java") }

// javaOkHTTPClient is the Java driver with its clients on the OkHttp transport
// (StatecastClient.Transport.OKHTTP), which a Many's channels do not use.
func javaOkHTTPClient(t testing.TB) client {
	c := javaDriver(t, "java-okhttp", "-Dstatecast.conformance.transport=OKHTTP")
	c.without = map[string]bool{"many_channel": true}
	return c
}

// javaDriver is the Java driver named name, its JVM given props (-D options) besides
// its options.
func javaDriver(t testing.TB, name string, props ...string) client {
	dir := filepath.Join(repoRoot(t), "clients", "java", "client")
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testenv.InCI() {
				t.Fatalf("conformance: %s not found (CI=true): install Java 17 and Maven", tool)
			}
			t.Skipf("conformance: %s not found: the Java client is not tested (install Java 17 and Maven)", tool)
		}
	}
	javaOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "target", "test-classes", "io", "statecast", "client", "conformance", "Driver.class")); err == nil {
			return
		}
		cmd := exec.Command("mvn", "-B", "-q", "-pl", "client", "-am", "package", "-DskipTests")
		cmd.Dir = filepath.Dir(dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			javaErr = fmt.Errorf("mvn package in clients/java (module client): %v\n%s", err, out)
		}
	})
	if javaErr != nil {
		t.Fatal(javaErr)
	}
	cp := strings.Join([]string{filepath.Join(dir, "target", "classes"), filepath.Join(dir, "target", "test-classes"),
		filepath.Join(dir, "target", "lib", "*")}, string(os.PathListSeparator))
	// A class path of jars only (CONF_JAVA_CP): class data sharing archives no class read
	// from a directory, so a benchmark with an AppCDS archive runs the driver from jars.
	if o, ok := os.LookupEnv("CONF_JAVA_CP"); ok {
		cp = o
	}
	// The scenarios are short: a JVM tuned for start-up (CONF_JAVA_OPTS replaces it, as the
	// benchmarks do with a JVM's defaults).
	opts := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	if o, ok := os.LookupEnv("CONF_JAVA_OPTS"); ok {
		opts = strings.Fields(o)
	}
	argv := append(append([]string{"java"}, opts...), props...)
	return client{name: name, argv: append(argv, "-cp", cp, "io.statecast.client.conformance.Driver")}
}

// start runs the driver with cfg; it is killed when the test ends.
func (c client) start(t testing.TB, cfg driverConfig) *proc {
	t.Helper()
	if cfg.Service == "" {
		cfg.Service = "conformance"
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, events: make(chan event, 1<<16), stderr: &testenv.LockedBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the %s driver: %v", c.name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s driver stderr:\n%s", c.name, tail(p.stderr.String(), 4000))
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			if !bytes.HasPrefix(sc.Bytes(), []byte("{")) {
				// Not an event: a line the runtime printed (a JVM's notice, say).
				fmt.Fprintf(p.stderr, "stdout: %s\n", sc.Bytes())
				continue
			}
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				p.events <- event{Event: "error", Error: "bad driver line: " + sc.Text()}
				continue
			}
			if ev.Event == "change" {
				p.mu.Lock()
				p.changes = append(p.changes, ev)
				p.mu.Unlock()
				continue
			}
			p.events <- ev
		}
		close(p.events)
	}()
	line, _ := json.Marshal(cfg)
	p.send(string(line))
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("driver stdin: %v", err)
	}
}

// next returns the next event named one of names (others are dropped, "error" fails).
func (p *proc) next(d time.Duration, names ...string) event {
	p.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				p.t.Fatalf("driver exited while waiting for %v; stderr:\n%s", names, tail(p.stderr.String(), 4000))
			}
			for _, n := range names {
				if ev.Event == n {
					return ev
				}
			}
			if ev.Event == "error" {
				p.t.Fatalf("driver error while waiting for %v: %s", names, ev.Error)
			}
		case <-deadline:
			p.t.Fatalf("timed out after %v waiting for %v; stderr:\n%s", d, names, tail(p.stderr.String(), 4000))
		}
	}
}

func (p *proc) dump() event {
	p.t.Helper()
	p.send(`{"cmd":"dump"}`)
	return p.next(time.Minute, "dump")
}

// kill9 ends the driver with SIGKILL.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// close asks the driver to close its client and checks that it exits cleanly.
func (p *proc) close() {
	p.t.Helper()
	p.send(`{"cmd":"close"}`)
	ev := p.next(time.Minute, "closed")
	if ev.Error != "" {
		p.t.Errorf("close: %s", ev.Error)
	}
	_ = p.cmd.Wait()
}

// changeLog returns the change events received so far.
func (p *proc) changeLog() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.changes...)
}
