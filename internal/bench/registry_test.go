package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestMainDispatch(t *testing.T) {
	var gotArgs []string
	list := []Benchmark{
		{Name: "zeta", About: "last", Run: func(_ context.Context, args []string, w io.Writer) error {
			gotArgs = args
			_, err := io.WriteString(w, "zeta ran\n")
			return err
		}},
		{Name: "alpha", About: "first", Run: func(context.Context, []string, io.Writer) error { return errors.New("boom") }},
		{Name: "flags", About: "parses flags", Run: func(_ context.Context, args []string, w io.Writer) error {
			fs := flag.NewFlagSet("flags", flag.ContinueOnError)
			fs.SetOutput(w)
			return fs.Parse(args)
		}},
		{Name: "cancel", About: "interrupted", Run: func(context.Context, []string, io.Writer) error { return context.Canceled }},
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

	code, out, _ = run("zeta", "-x", "1")
	if code != 0 || out != "zeta ran\n" || strings.Join(gotArgs, " ") != "-x 1" {
		t.Errorf("zeta: code %d, output %q, args %q", code, out, gotArgs)
	}

	code, out, errs := run("nope")
	if code != 2 || errs != "prog: unknown benchmark \"nope\"\n" || out != wantList {
		t.Errorf("unknown: code %d, stderr %q, stdout %q", code, errs, out)
	}

	if code, _, errs := run("alpha"); code != 1 || errs != "prog alpha: boom\n" {
		t.Errorf("failing benchmark: code %d, stderr %q", code, errs)
	}
	if code, out, errs := run("flags", "-h"); code != 0 || errs != "" || !strings.Contains(out, "Usage of flags") {
		t.Errorf("benchmark -h: code %d, stderr %q, stdout %q", code, errs, out)
	}
	if code, _, errs := run("flags", "-nope"); code != 1 || !strings.Contains(errs, "flag provided but not defined") {
		t.Errorf("bad flag: code %d, stderr %q", code, errs)
	}
	if code, _, errs := run("cancel"); code != 0 || errs != "" {
		t.Errorf("interrupted: code %d, stderr %q", code, errs)
	}
}

func TestMainRefusesDuplicates(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a duplicate name did not panic")
		}
	}()
	nop := func(context.Context, []string, io.Writer) error { return nil }
	Main(context.Background(), "prog", []Benchmark{{Name: "a", Run: nop}, {Name: "a", Run: nop}}, nil, io.Discard, io.Discard)
}
