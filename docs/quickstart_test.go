package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// TestQuickstartCode: the quick start shows examples/quickstart/main.go as it is, so the
// code a reader copies is the code that builds (go build ./... compiles the example).
func TestQuickstartCode(t *testing.T) {
	doc, err := os.ReadFile("quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("../examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(code)+"```\n") {
		t.Fatal("docs/quickstart.md does not show examples/quickstart/main.go as it is: copy the file into its go block")
	}
}

// clonePath is how the quick start writes the path of the reader's clone.
const clonePath = "/path/to/statecast"

// fence is a fenced block of the quick start: its language and its text.
type fence struct{ lang, text string }

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")

func fences(doc string) []fence {
	var fs []fence
	for _, m := range fenceRE.FindAllStringSubmatch(doc, -1) {
		fs = append(fs, fence{m[1], m[2]})
	}
	return fs
}

// quickstartSteps are the quick start's blocks by role, in the doc's order: the servers
// (step 1: commands in the clone), what the demo prints of use to step 4, the reader's
// module (step 2), the code (step 3), go mod tidy, the run (step 4) and its output.
type quickstartSteps struct {
	servers, demoLines, module, code, tidy, run, output string
}

func parseQuickstart(doc string) (quickstartSteps, error) {
	var sh, text, gocode []string
	for _, f := range fences(doc) {
		switch f.lang {
		case "sh":
			sh = append(sh, f.text)
		case "text":
			text = append(text, f.text)
		case "go":
			gocode = append(gocode, f.text)
		default:
			return quickstartSteps{}, fmt.Errorf("a block of language %q: the test runs sh blocks, writes the go block and compares text blocks", f.lang)
		}
	}
	if len(sh) != 4 || len(text) != 2 || len(gocode) != 1 {
		return quickstartSteps{}, fmt.Errorf("%d sh, %d text and %d go blocks; the test knows 4 sh (servers, module, tidy, run), 2 text (the demo's lines, the output) and 1 go", len(sh), len(text), len(gocode))
	}
	return quickstartSteps{servers: sh[0], demoLines: text[0], module: sh[1], code: gocode[0], tidy: sh[2], run: sh[3], output: text[1]}, nil
}

// TestQuickstart runs docs/quickstart.md as a reader with a clone of the repository does:
// step 1's commands in the clone (the demo, `go run ./cmd/cachectl-dev -for 0`, on the
// environment's PostgreSQL), steps 2 to 4 as written in a fresh folder outside the
// repository (go mod init, the replace directive to the clone, go get, main.go from the
// doc's go block, go mod tidy, go run with the player's address and DSN the demo printed),
// and compares the service's output with the doc's: its view, its index in key order, and
// the read of its own write. Under CI=true a missing PostgreSQL fails it.
//
// The demo seeds its fixed database (statecast_demo) anew: a `make demo` running on the
// same server at the same time would be disturbed, as by a second `make demo`.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo and a module of its own (-short)")
	}
	dsn := testenv.PostgresDSN(t)
	doc, err := os.ReadFile("quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseQuickstart(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Step 1, in the clone; steps 2 to 4, in a folder outside the repository.
	demo, playerAddr, demoDSN := runDemoStep(t, ctx, root, steps.servers, steps.demoLines, dsn)
	dir := outsideDir(t, root)
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=") // the reader's shell: no workspace, no flags of the test's
	cwd := dir
	cwd, _ = runBlock(t, ctx, cwd, env, "step 2", strings.ReplaceAll(steps.module, clonePath, root))
	if err := os.WriteFile(filepath.Join(cwd, "main.go"), []byte(steps.code), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd, _ = runBlock(t, ctx, cwd, env, "go mod tidy", steps.tidy)
	run := steps.run
	for _, sub := range []struct{ re, with string }{
		{`-players \S+`, "-players " + playerAddr},
		{`-db '[^']*'`, "-db '" + demoDSN + "'"},
	} {
		re := regexp.MustCompile(sub.re)
		if !re.MatchString(run) {
			t.Fatalf("step 4 has no %s: %q", sub.re, run)
		}
		run = re.ReplaceAllLiteralString(run, sub.with)
	}
	_, out := runBlock(t, ctx, cwd, env, "step 4", run)
	if out != steps.output {
		t.Errorf("step 4 printed:\n%s\nthe doc shows:\n%s", out, steps.output)
	}
	demo.stop(t)
}

// runBlock runs a block of shell commands in cwd with bash (-e: the first failure ends it)
// and returns the folder it ended in and its standard output.
func runBlock(t *testing.T, ctx context.Context, cwd string, env []string, what, block string) (string, string) {
	t.Helper()
	pwd := filepath.Join(t.TempDir(), "pwd")
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block+"\npwd > "+pwd)
	cmd.Dir, cmd.Env = cwd, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s", what, err, block, stdout.String(), stderr.String())
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(pwd)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)), stdout.String()
}

// runDemoStep runs a quick start's step 1 in the clone root: its lines (servers) must be
// the ones the test knows — cd, postgres.sh, which would start a cluster of its own for
// this checkout (the test gives the demo the environment's server, dsn, instead, as the
// docs allow), and the demo itself — and the demo must print every line of demoLines.
// It returns the running demo, its player's address and its DSN.
func runDemoStep(t *testing.T, ctx context.Context, root, servers, demoLines, dsn string) (demo *demoProc, playerAddr, demoDSN string) {
	t.Helper()
	var demoCmd string
	for _, line := range strings.Split(strings.TrimSpace(servers), "\n") {
		switch {
		case line == "cd "+clonePath:
		case line == `eval "$(deploy/local/postgres.sh start)"`:
		case strings.HasPrefix(line, "go run ./cmd/cachectl-dev"):
			demoCmd = line
		default:
			t.Fatalf("step 1 has a line the test does not know how to run: %q", line)
		}
	}
	if demoCmd == "" {
		t.Fatal("step 1 does not run the demo (go run ./cmd/cachectl-dev)")
	}
	demo = startDemo(t, ctx, root, demoCmd, dsn)
	playerAddr, demoDSN = demo.wait(t)
	for _, line := range strings.Split(strings.TrimSpace(demoLines), "\n") {
		if !demo.printed(line) {
			t.Errorf("the demo printed no line like the doc's %q:\n%s", line, demo.out.String())
		}
	}
	return demo, playerAddr, demoDSN
}

// outsideDir is a temporary folder outside the repository root, where a reader's own
// project goes.
func outsideDir(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	if rel, err := filepath.Rel(root, dir); err != nil || !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temp folder %s is inside the repository %s", dir, root)
	}
	return dir
}

// demoProc is step 1's demo, running in its own process group.
type demoProc struct {
	cmd  *exec.Cmd
	out  testenv.LockedBuffer
	done chan error

	mu    sync.Mutex
	lines []string
	ready chan struct{} // closed when it serves (its script and check done)
	once  sync.Once
}

var (
	playerLine = regexp.MustCompile(`^-- player serving gRPC on (\S+): `)
	dsnLine    = regexp.MustCompile(`^-- demo database: psql '([^']+)'$`)
)

func startDemo(t *testing.T, ctx context.Context, root, line, dsn string) *demoProc {
	t.Helper()
	d := &demoProc{done: make(chan error, 1), ready: make(chan struct{})}
	d.cmd = exec.Command("bash", "-c", "exec "+line)
	d.cmd.Dir = root
	d.cmd.Env = append(os.Environ(), "STATECAST_PG_DSN="+dsn)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go run's child too: see stop
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(&d.out, l)
			d.mu.Lock()
			d.lines = append(d.lines, l)
			d.mu.Unlock()
			if strings.HasPrefix(l, "-- serving ") {
				d.once.Do(func() { close(d.ready) })
			}
		}
	}()
	go func() { err := d.cmd.Wait(); pw.Close(); d.done <- err }()
	t.Cleanup(func() { d.kill() })
	go func() {
		<-ctx.Done()
		d.kill()
	}()
	return d
}

// wait blocks until the demo serves and returns the player's address and the demo
// database's DSN it printed.
func (d *demoProc) wait(t *testing.T) (addr, dsn string) {
	t.Helper()
	select {
	case <-d.ready:
	case err := <-d.done:
		t.Fatalf("the demo ended (%v) before serving:\n%s", err, d.out.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("the demo does not serve after 5 minutes:\n%s", d.out.String())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.lines {
		if m := playerLine.FindStringSubmatch(l); m != nil {
			addr = m[1]
		}
		if m := dsnLine.FindStringSubmatch(l); m != nil {
			dsn = m[1]
		}
	}
	if addr == "" || dsn == "" {
		t.Fatalf("the demo printed no player address or no DSN:\n%s", d.out.String())
	}
	return addr, dsn
}

// printed reports whether the demo printed a line like the doc's: the same but for the
// addresses and the DSN, which differ from one run to the next.
func (d *demoProc) printed(docLine string) bool {
	re := regexp.QuoteMeta(docLine)
	re = regexp.MustCompile(`'postgres://[^']*'`).ReplaceAllLiteralString(re, `'postgres://[^']*'`)
	re = regexp.MustCompile(`127\\\.0\\\.0\\\.1:\d+`).ReplaceAllLiteralString(re, `127\.0\.0\.1:\d+`)
	pat := regexp.MustCompile("^" + re + "$")
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.lines {
		if pat.MatchString(l) {
			return true
		}
	}
	return false
}

// stop ends the demo as Ctrl-C does and checks that it shut down cleanly (its slot
// dropped).
func (d *demoProc) stop(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-d.done:
		d.done <- err
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("the demo: %v", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("the demo did not stop within a minute of Ctrl-C:\n%s", d.out.String())
	}
	if !strings.Contains(d.out.String(), "-- done") {
		t.Errorf("the demo did not shut down cleanly:\n%s", d.out.String())
	}
}

// kill ends the demo's process group at once (a test that failed).
func (d *demoProc) kill() {
	select {
	case err := <-d.done:
		d.done <- err
		return
	default:
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	}
}
