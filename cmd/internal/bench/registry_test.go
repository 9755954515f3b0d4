package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMainDispatch(t *testing.T) {
	var gotArgs []string
	var brokers []string
	list := []Benchmark{
		{Name: "zeta", About: "last", Run: func(_ context.Context, a *Args, w io.Writer) error {
			x := a.Int("x", 0, "a flag of its own")
			var err error
			if brokers, err = a.Parse(); err != nil {
				return err
			}
			gotArgs = append(a.Args(), "x="+string(rune('0'+*x)))
			_, err = io.WriteString(w, "zeta ran\n")
			return err
		}},
		{Name: "alpha", About: "first", Run: func(context.Context, *Args, io.Writer) error { return errors.New("boom") }},
		{Name: "flags", About: "parses flags", Run: func(_ context.Context, a *Args, _ io.Writer) error {
			a.Int("n", 1, "a number")
			_, err := a.Parse()
			return err
		}},
		{Name: "cancel", About: "interrupted", Run: func(context.Context, *Args, io.Writer) error { return context.Canceled }},
	}
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := Main(context.Background(), "prog", list, args, &out, &errw)
		return code, out.String(), errw.String()
	}

	code, out, _ := run()
	wantList := "usage: prog <benchmark> [flags]\n\nbenchmarks:\n" +
		"  alpha                        first\n" +
		"  cancel                       interrupted\n" +
		"  flags                        parses flags\n" +
		"  zeta                         last\n"
	if code != 0 || out != wantList {
		t.Errorf("no args: code %d, list\n%s\nwant\n%s", code, out, wantList)
	}
	if code, out, _ := run("-h"); code != 0 || out != wantList {
		t.Errorf("-h: code %d, output %q", code, out)
	}

	code, out, _ = run("zeta", "-brokers", "a:1,b:2", "-x", "7", "rest")
	if code != 0 || out != "zeta ran\n" || strings.Join(gotArgs, " ") != "rest x=7" || strings.Join(brokers, " ") != "a:1 b:2" {
		t.Errorf("zeta: code %d, output %q, args %q, brokers %q", code, out, gotArgs, brokers)
	}

	code, out, errs := run("nope")
	if code != 2 || errs != "prog: unknown benchmark \"nope\"\n" || out != wantList {
		t.Errorf("unknown: code %d, stderr %q, stdout %q", code, errs, out)
	}

	if code, _, errs := run("alpha"); code != 1 || errs != "prog alpha: boom\n" {
		t.Errorf("failing benchmark: code %d, stderr %q", code, errs)
	}
	code, out, errs = run("flags", "-h")
	if code != 0 || out != "" || !strings.Contains(errs, "Usage of flags") {
		t.Errorf("benchmark -h: code %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, f := range []string{"-n", "-brokers", "-cpuprofile", "-memprofile", "-mutexprofile", "-blockprofile", "-trace"} {
		if !strings.Contains(errs, f+" ") {
			t.Errorf("benchmark -h does not show %s:\n%s", f, errs)
		}
	}
	if code, _, errs := run("flags", "-nope"); code != 1 || !strings.Contains(errs, "flag provided but not defined") {
		t.Errorf("bad flag: code %d, stderr %q", code, errs)
	}
	if code, _, errs := run("flags", "-brokers", ""); code != 1 || !strings.Contains(errs, "no Kafka brokers") {
		t.Errorf("no brokers: code %d, stderr %q", code, errs)
	}
	if code, _, errs := run("cancel"); code != 0 || errs != "" {
		t.Errorf("interrupted: code %d, stderr %q", code, errs)
	}
}

// TestMainWritesProfiles checks that a profile asked for on the command line is written
// when the benchmark returns.
func TestMainWritesProfiles(t *testing.T) {
	mem := filepath.Join(t.TempDir(), "mem.prof")
	list := []Benchmark{{Name: "b", Run: func(_ context.Context, a *Args, _ io.Writer) error {
		_, err := a.Parse()
		return err
	}}}
	if code := Main(context.Background(), "prog", list, []string{"b", "-brokers", "x:1", "-memprofile", mem}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if st, err := os.Stat(mem); err != nil || st.Size() == 0 {
		t.Errorf("memory profile not written: %v", err)
	}
}

func TestMainRefusesDuplicates(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a duplicate name did not panic")
		}
	}()
	nop := func(context.Context, *Args, io.Writer) error { return nil }
	Main(context.Background(), "prog", []Benchmark{{Name: "a", Run: nop}, {Name: "a", Run: nop}}, nil, io.Discard, io.Discard)
}
