package player

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/kafkaconn"
)

// syncWriter is an io.Writer that many goroutines may write to (the logger's output).
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestShutdownLogged: Run's graceful stop logs what it does, in order — the shutdown with
// the streams and targets, the gRPC server stopped (within shutdown_grace), everything
// stopped with how long it took — durations readable in the daemons' JSON log.
func TestShutdownLogged(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(5, []string{"a"}, 10, newRand(1))
	var out syncWriter
	p, err := New(Config{Insecure: true, Listen: "127.0.0.1:0", Kafka: kafkaconn.Config{Brokers: e.brokers},
		Streams: []StreamConfig{{Name: "s", Topic: e.topic}}, ShutdownGrace: 2 * time.Second},
		WithLogger(daemon.NewLogger(&out, slog.LevelInfo)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if err := p.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop")
	}
	var msgs []string
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		msg, _ := m["msg"].(string)
		msgs = append(msgs, msg)
		lines[msg] = m
	}
	i := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "shutting down: ") })
	if i < 0 {
		t.Fatalf("no shutdown line in the log:\n%s", out.String())
	}
	if l := lines[msgs[i]]; l["streams"] != 1.0 || l["targets"] != 0.0 {
		t.Errorf("shutdown line %v: want 1 stream, 0 targets", l)
	}
	got := msgs[i:]
	for _, w := range []string{"gRPC server stopped", "every stream and target stopped"} {
		j := slices.Index(got, w)
		if j < 0 {
			t.Fatalf("no %q after the shutdown line, in order; the lines after it: %q", w, msgs[i:])
		}
		got = got[j:]
	}
	if l := lines["gRPC server stopped"]; l["graceful"] != true || l["grace"] != "2s" {
		t.Errorf("gRPC line %v: want graceful within a readable 2s grace", l)
	}
	took, ok := lines["every stream and target stopped"]["took"].(string)
	if _, err := time.ParseDuration(took); !ok || err != nil {
		t.Errorf("took %v, want a readable duration", lines["every stream and target stopped"]["took"])
	}
}
