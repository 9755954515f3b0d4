package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/statecast/statecast/internal/bench"
)

// TestList checks the list a user sees: every benchmark once, described without issue
// numbers or history.
func TestList(t *testing.T) {
	var out, errs bytes.Buffer
	if code := bench.Main(context.Background(), "cachebench", benchmarks, nil, &out, &errs); code != 0 {
		t.Fatalf("listing exited %d: %s", code, errs.String())
	}
	for _, b := range benchmarks {
		if n := strings.Count(out.String(), "  "+b.Name+" "); n != 1 {
			t.Errorf("%s listed %d times", b.Name, n)
		}
	}
	if m := regexp.MustCompile(`(?i)issue|§|round \d|session`).FindString(out.String()); m != "" {
		t.Errorf("the list mentions %q:\n%s", m, out.String())
	}
}

// TestFlags parses every benchmark's flags without running it: -h prints them and stops,
// an unknown flag is an error. Neither touches a server.
func TestFlags(t *testing.T) {
	for _, b := range benchmarks {
		var out bytes.Buffer
		err := b.Run(context.Background(), []string{"-h"}, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -h: %v, want flag.ErrHelp", b.Name, err)
		}
		if err := b.Run(context.Background(), []string{"-no-such-flag"}, &out); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -no-such-flag: %v, want a parse error", b.Name, err)
		}
	}
}
