package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logLines decodes the JSON lines of buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestReadableDurations: a duration is written as its String, at the top level, in a group
// and through With; other values are left alone.
func TestReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo)
	log.With("interval", 250*time.Millisecond).Info("x", "took", 1500*time.Millisecond, "n", 3,
		slog.Group("g", "wait", 90*time.Second), "any", any(2*time.Hour))
	log.Debug("not at info")
	lines := logLines(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1: %s", len(lines), buf.String())
	}
	l := lines[0]
	g, _ := l["g"].(map[string]any)
	for key, got := range map[string]any{"interval": l["interval"], "took": l["took"], "g.wait": g["wait"], "any": l["any"]} {
		want := map[string]string{"interval": "250ms", "took": "1.5s", "g.wait": "1m30s", "any": "2h0m0s"}[key]
		if got != want {
			t.Errorf("%s = %v (%T), want %q", key, got, got, want)
		}
	}
	if l["n"] != 3.0 {
		t.Errorf("n = %v, want the number 3", l["n"])
	}
}

// TestRunLogged: a stop by a signal logs "stopping" with the signal, then "stopped" with a
// readable duration, in that order, after what run logs while it stops; a run that fails
// logs neither (Main logs its error).
func TestRunLogged(t *testing.T) {
	var buf bytes.Buffer
	env := Env{Name: "testd", Log: NewLogger(&buf, slog.LevelInfo)}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGUSR1)
	defer stop()
	run := func(ctx context.Context, env Env) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			return err
		}
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // the stop's own work
		env.Log.Info("flushed", "what", "everything")
		return nil
	}
	if err := runLogged(ctx, env, run); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, &buf)
	var msgs []string
	for _, l := range lines {
		msgs = append(msgs, l["msg"].(string))
	}
	if strings.Join(msgs, "|") != "testd stopping|flushed|testd stopped" {
		t.Fatalf("log lines %q, want stopping, flushed, stopped:\n%s", msgs, buf.String())
	}
	if r := lines[0]["reason"]; r != "user defined signal 1 signal received" {
		t.Errorf("stopping: reason %v, want the signal", r)
	}
	took, ok := lines[2]["took"].(string)
	d, err := time.ParseDuration(took)
	if !ok || err != nil || d < 20*time.Millisecond || d > time.Minute {
		t.Errorf("stopped: took %v, want a readable duration of at least 20ms", lines[2]["took"])
	}

	buf.Reset()
	failed := errors.New("boom")
	if err := runLogged(context.Background(), env, func(context.Context, Env) error { return failed }); err != failed {
		t.Fatalf("runLogged = %v, want run's error", err)
	}
	if buf.Len() != 0 {
		t.Errorf("a failed run logged %s", buf.String())
	}
}
