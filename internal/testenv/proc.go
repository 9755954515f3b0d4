package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BuildCommand builds the command of package pkg (an import path) into the test's
// temporary directory and returns the binary's path. go build runs in the repository's
// root module, so that a test of a nested module (deploy/, cacheclient/e2e/) builds a
// command of the root module with the root's go.mod and go.sum.
func BuildCommand(t testing.TB, pkg string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testenv: go build %s: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Proc is a command started by StartCommand: what it writes (stdout and stderr, in one
// buffer) and its end.
type Proc struct {
	cmd  *exec.Cmd
	out  LockedBuffer
	done chan struct{}
	err  error
}

// StartCommand starts bin with args and env added to the test's environment. It is
// stopped (SIGTERM, then SIGKILL) when the test ends.
func StartCommand(t testing.TB, bin string, args []string, env ...string) *Proc {
	t.Helper()
	p := &Proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Stop() })
	return p
}

// Output is everything the command wrote so far.
func (p *Proc) Output() string { return p.out.String() }

// Wait waits at most d for the command to exit and reports whether it did, with its
// error (an *exec.ExitError for a non-zero status).
func (p *Proc) Wait(d time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// Stop ends the command (SIGTERM; SIGKILL after 20s) and waits for it.
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitOutput waits at most d until the command's output contains s.
func (p *Proc) WaitOutput(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(p.Output(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// NoSecrets fails the test for every line of out that holds one of secrets (or a part of
// one of at least 12 characters: a secret cut or wrapped is still a leak).
func NoSecrets(t testing.TB, what, out string, secrets ...string) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		for _, s := range secrets {
			if s != "" && leaks(line, s) {
				t.Errorf("%s: line %d holds a secret (%.6s…): %s", what, i+1, s, line)
			}
		}
	}
}

func leaks(line, secret string) bool {
	const part = 12
	if len(secret) <= part {
		return strings.Contains(line, secret)
	}
	for i := 0; i+part <= len(secret); i++ {
		if strings.Contains(line, secret[i:i+part]) {
			return true
		}
	}
	return false
}
