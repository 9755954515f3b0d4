package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/statecast/statecast/cmd/internal/bench"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = bench.Main(context.Background(), "cachebench", benchmarks, args, &out, &errs)
	return code, out.String(), errs.String()
}

// TestList checks the list a user sees: every benchmark once, described without issue
// numbers or history.
func TestList(t *testing.T) {
	code, out, errs := run()
	if code != 0 {
		t.Fatalf("listing exited %d: %s", code, errs)
	}
	for _, b := range benchmarks {
		if n := strings.Count(out, "  "+b.Name+" "); n != 1 {
			t.Errorf("%s listed %d times", b.Name, n)
		}
	}
	if m := regexp.MustCompile(`(?i)issue|§|round \d|session`).FindString(out); m != "" {
		t.Errorf("the list mentions %q:\n%s", m, out)
	}
}

// TestFlags parses every benchmark's flags without running it: -h prints them and exits
// 0, an unknown flag fails. Neither touches a server.
func TestFlags(t *testing.T) {
	for _, b := range benchmarks {
		code, _, errs := run(b.Name, "-h")
		if code != 0 || !strings.Contains(errs, "Usage of "+b.Name) || !strings.Contains(errs, "-brokers") {
			t.Errorf("%s -h: exit %d, usage:\n%s", b.Name, code, errs)
		}
		if code, _, errs := run(b.Name, "-no-such-flag"); code != 1 || !strings.Contains(errs, "flag provided but not defined") {
			t.Errorf("%s -no-such-flag: exit %d, %q", b.Name, code, errs)
		}
	}
}
