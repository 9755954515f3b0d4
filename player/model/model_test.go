package model

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/statecast/statecast/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tools returns the paths of spin and a C compiler, or skips (fails under CI).
func tools(t *testing.T) (spin, cc string) {
	t.Helper()
	spin, err := exec.LookPath("spin")
	if err == nil {
		for _, c := range []string{"cc", "gcc", "clang"} {
			if cc, err = exec.LookPath(c); err == nil {
				return spin, cc
			}
		}
	}
	msg := "spin and a C compiler are needed for the model check (`make tools`, or apt-get install spin gcc)"
	if testenv.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return "", ""
}

var errorsRe = regexp.MustCompile(`errors: (\d+)`)

// verify generates the verifier for the model with the given spin defines, compiles it
// and runs it, returning pan's output and the number of errors it reports.
func verify(t *testing.T, defines []string, ccFlags []string, panFlags []string) (string, string) {
	t.Helper()
	spin, cc := tools(t)
	dir := t.TempDir()
	src, err := os.ReadFile("targetqueue.pml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "targetqueue.pml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	// The search is CPU-bound: on a machine shared with other tests it takes several times
	// its usual minute, so it is bounded by the test binary's deadline (-timeout; 15
	// minutes without one) rather than by a guess of its own.
	deadline := time.Now().Add(15 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	run := func(name string, args ...string) string {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run(spin, append(append([]string{}, defines...), "-a", "targetqueue.pml")...)
	run(cc, append(append([]string{"-O2", "-o", "pan"}, ccFlags...), "pan.c")...)
	out := run("./pan", panFlags...)
	m := errorsRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pan output has no error count:\n%s", out)
	}
	return out, m[1]
}

// TestSafety: exhaustive search, the in-order/no-duplicate assert never fails and no
// invalid end state (deadlock) exists.
func TestSafety(t *testing.T) {
	out, errs := verify(t, nil, nil, nil)
	if errs != "0" || !strings.Contains(out, "invalid end states\t+") {
		t.Fatalf("safety: %s errors\n%s", errs, out)
	}
	t.Log(stats(out))
}

// TestLiveness: <>(last_ack == NMESSAGES) under weak fairness, no acceptance cycle.
func TestLiveness(t *testing.T) {
	out, errs := verify(t, []string{"-DLIVENESS"}, []string{"-DNFAIR=4"}, []string{"-a", "-f"})
	if errs != "0" || !strings.Contains(out, "acceptance   cycles \t+ (fairness enabled)") {
		t.Fatalf("liveness: %s errors\n%s", errs, out)
	}
	t.Log(stats(out))
}

// TestMutants: seeded bugs that spin must reject. Without terms, a stale recovery
// fetcher's pushes or its fetchingCompleted reach the new recovery and the assert fails.
func TestMutants(t *testing.T) {
	tests := []struct {
		name     string
		defines  []string
		ccFlags  []string
		panFlags []string
		want     string
	}{
		{"no terms", []string{"-DNOTERMS"}, nil, nil, "assertion violated"},
		{"overflow recovers from the ack", []string{"-DOVERFLOW_FROM_ACK"}, nil, nil, "assertion violated"},
		{"no fetchingCompleted (liveness)", []string{"-DLIVENESS", "-DNOFETCHCOMPLETE"}, []string{"-DNFAIR=4"}, []string{"-a", "-f"}, "acceptance cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := verify(t, tt.defines, tt.ccFlags, tt.panFlags)
			if errs == "0" || !strings.Contains(out, tt.want) {
				t.Fatalf("mutant %q not rejected (errors: %s, want %q)\n%s", tt.name, errs, tt.want, out)
			}
			t.Logf("rejected: %s", firstLine(out, tt.want))
		})
	}
}

func stats(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "states, stored") || strings.Contains(l, "errors:") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, "; ")
}

func firstLine(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
