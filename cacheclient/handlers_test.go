package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestHandlerKeyOrderUnderConcurrency: many updates of a few keys; each key's changes must
// reach the handler in index order, and the handler runs keys concurrently.
func TestHandlerKeyOrderUnderConcurrency(t *testing.T) {
	const keys, perKey = 8, 40
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(0); err != nil {
			return err
		}
		idx := int64(1)
		for i := 0; i < perKey; i++ {
			var es []*statecastv1.Entry
			for k := 0; k < keys; k++ {
				es = append(es, ent(idx, fmt.Sprint(k), evJSON(i, "x")))
				idx++
			}
			if err := s.batch(es...); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	last := map[string]int64{}
	var running, maxRunning atomic.Int32
	var n atomic.Int32
	var bad error
	startClient(t, Config{}, func(c *Client, v *View[event]) {
		OnChange(v, func(_ context.Context, ch Change[event]) error {
			r := running.Add(1)
			defer running.Add(-1)
			for m := maxRunning.Load(); r > m && !maxRunning.CompareAndSwap(m, r); m = maxRunning.Load() {
			}
			time.Sleep(100 * time.Microsecond) // give other keys a chance to overlap
			mu.Lock()
			if ch.Position <= last[ch.Key] && bad == nil {
				bad = fmt.Errorf("key %s: index %d after %d", ch.Key, ch.Position, last[ch.Key])
			}
			last[ch.Key] = ch.Position
			mu.Unlock()
			n.Add(1)
			return nil
		}, WithConcurrency(4))
	}, fp)
	eventually(t, "all changes handled", func() bool { return n.Load() == keys*perKey })
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
	t.Logf("max concurrent handler calls: %d", maxRunning.Load())
}

// TestHandlerErrorRetriedThenReported: a failing key is retried, then reported to the hook,
// and never blocks the other keys.
func TestHandlerErrorRetriedThenReported(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(0); err != nil {
			return err
		}
		if err := s.batch(ent(1, "bad", evJSON(1, "x"))); err != nil {
			return err
		}
		return s.batch(ent(2, "good", evJSON(2, "x")))
	})
	var attempts atomic.Int32
	good := make(chan struct{})
	reported := make(chan error, 1)
	release := make(chan struct{})
	c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t"}, WithHooks(Hooks{
		OnHandlerError: func(err error) { reported <- err },
	}))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Register(c, "events", decodeEvent)
	OnChange(v, func(ctx context.Context, ch Change[event]) error {
		if ch.Key == "good" {
			close(good)
			return nil
		}
		if attempts.Add(1) == 1 {
			<-release // the first attempt of "bad" blocks until "good" was handled
		}
		return errors.New("boom")
	}, WithRetry(3, time.Millisecond, 2*time.Millisecond))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-good:
	case <-time.After(20 * time.Second):
		t.Fatal("a failing key blocked another key")
	}
	close(release)
	select {
	case err := <-reported:
		var he *HandlerError
		if !errors.As(err, &he) || he.Key != "bad" || he.Attempts != 3 || attempts.Load() != 3 {
			t.Fatalf("reported %v after %d attempts", err, attempts.Load())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("handler error never reported")
	}
	eventually(t, "handler error counted", func() bool { return c.Stats().HandlerErrors == 1 })
}

// TestWaitReadyIncludesInitialPass: with WithInitialPass, WaitReady returns only after the
// handler saw every key of the snapshot.
func TestWaitReadyIncludesInitialPass(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		var es []*statecastv1.Entry
		for i := range 100 {
			es = append(es, ent(int64(i), fmt.Sprint(i), evJSON(i, "x")))
		}
		return s.snapshot(200, es...)
	})
	var n atomic.Int32
	c, _ := startClient(t, Config{}, func(c *Client, v *View[event]) {
		OnChange(v, func(context.Context, Change[event]) error {
			time.Sleep(time.Millisecond)
			n.Add(1)
			return nil
		}, WithInitialPass())
	}, fp)
	waitReady(t, c)
	if got := n.Load(); got != 100 {
		t.Fatalf("ready after %d of 100 initial changes", got)
	}
}

func TestRegisterAfterStartFails(t *testing.T) {
	fp := startFake(t, func(int, *statecastv1.Hello, *fakeStream) error { return nil })
	c, v := startClient(t, Config{}, nil, fp)
	if _, err := Register(c, "late", decodeEvent); !errors.Is(err, ErrStarted) {
		t.Fatalf("Register after start: %v", err)
	}
	if err := v.AddIndex("late", func(event) []string { return nil }); !errors.Is(err, ErrStarted) {
		t.Fatalf("AddIndex after start: %v", err)
	}
	if err := OnChange(v, func(context.Context, Change[event]) error { return nil }); !errors.Is(err, ErrStarted) {
		t.Fatalf("OnChange after start: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no addresses", Config{Stream: "s", Service: "c"}},
		{"bad address", Config{Addresses: []string{"nohostport"}, Stream: "s", Service: "c"}},
		{"no stream", Config{Addresses: []string{"h:1"}, Service: "c"}},
		{"no service", Config{Addresses: []string{"h:1"}, Stream: "s"}},
		{"token without TLS", Config{Addresses: []string{"h:1"}, Stream: "s", Service: "c", Token: StaticToken("t")}},
		{"service too long", Config{Addresses: []string{"h:1"}, Stream: "s", Service: strings.Repeat("x", 257)}},
		{"negative duration", Config{Addresses: []string{"h:1"}, Stream: "s", Service: "c", PersistInterval: -1}},
		{"tiny window", Config{Addresses: []string{"h:1"}, Stream: "s", Service: "c", RecvWindow: 1000}},
		{"huge window", Config{Addresses: []string{"h:1"}, Stream: "s", Service: "c", RecvWindow: 1<<30 + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v", err)
			}
		})
	}
	c := newTestClient(t)
	if _, err := Register(c, "bad name", decodeEvent); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad view name: %v", err)
	}
	if _, err := Register(c, "ok", decodeEvent); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(c, "ok", decodeEvent); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("duplicate view: %v", err)
	}
}
