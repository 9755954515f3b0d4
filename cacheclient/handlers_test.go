package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestHandlerKeyOrderUnderConcurrency: many updates of a few keys; each key's changes must
// reach the handler in index order, and the handler runs keys concurrently.
func TestHandlerKeyOrderUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys, perKey = 8, 40
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
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
				time.Sleep(100 * time.Microsecond) // virtual: parks this call while the other keys run
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
		// The clock moves only once every call is parked in its sleep, so the changes of
		// the other keys start before: as many at once as WithConcurrency allows.
		if m := maxRunning.Load(); m != 4 {
			t.Fatalf("at most %d concurrent handler calls, want 4 (WithConcurrency)", m)
		}
	})
}

// TestHandlerErrorRetriedThenReported: a failing key is retried after the backoff of each
// attempt, then reported to the hook, and never blocks the other keys.
func TestHandlerErrorRetriedThenReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if err := s.snapshot(0); err != nil {
				return err
			}
			if err := s.batch(ent(1, "bad", evJSON(1, "x"))); err != nil {
				return err
			}
			return s.batch(ent(2, "good", evJSON(2, "x")))
		})
		var attempts atomic.Int32
		var mu sync.Mutex
		var failed []time.Time // when each attempt of "bad" failed
		good := make(chan struct{})
		reported := make(chan error, 1)
		release := make(chan struct{})
		c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t"}, memDialer(), WithHooks(Hooks{
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
				select { // the first attempt of "bad" blocks until "good" was handled
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			mu.Lock()
			failed = append(failed, time.Now())
			mu.Unlock()
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
		released := time.Now()
		select {
		case err := <-reported:
			var he *HandlerError
			if !errors.As(err, &he) || he.Key != "bad" || he.Attempts != 3 || attempts.Load() != 3 {
				t.Fatalf("reported %v after %d attempts", err, attempts.Load())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("handler error never reported")
		}
		// The handler takes no time: the attempts fail at the release, then 1 ms later (the
		// first wait, its Min) and 1 to 2 ms after that (the backoff doubles to its 2 ms
		// ceiling, jittered over the upper half), and the last is reported at once.
		reportedAt := time.Since(released)
		mu.Lock()
		var at []time.Duration
		for _, f := range failed {
			at = append(at, f.Sub(released))
		}
		mu.Unlock()
		if len(at) != 3 || at[0] != 0 || at[1] != time.Millisecond || at[2] < 2*time.Millisecond || at[2] > 3*time.Millisecond {
			t.Errorf("attempts failed at %v after the release, want [0s 1ms 2ms..3ms]", at)
		} else if reportedAt != at[2] {
			t.Errorf("reported %v after the release, want at the last attempt, %v", reportedAt, at[2])
		}
		eventually(t, "handler error counted", func() bool { return c.Stats().HandlerErrors == 1 })
	})
}

// TestWaitReadyIncludesInitialPass: with WithInitialPass, WaitReady returns only after the
// handler saw every key of the snapshot.
func TestWaitReadyIncludesInitialPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			var es []*statecastv1.Entry
			for i := range 100 {
				es = append(es, ent(int64(i), fmt.Sprint(i), evJSON(i, "x")))
			}
			return s.snapshot(200, es...)
		})
		var n atomic.Int32
		c, _ := startClient(t, Config{}, func(c *Client, v *View[event]) {
			OnChange(v, func(context.Context, Change[event]) error {
				time.Sleep(time.Millisecond) // virtual: a slow handler
				n.Add(1)
				return nil
			}, WithInitialPass())
		}, fp)
		waitReady(t, c)
		if got := n.Load(); got != 100 {
			t.Fatalf("ready after %d of 100 initial changes", got)
		}
	})
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

// TestNewValidates: a bad Config, a negative duration or size included, fails New with
// ErrConfig naming the field; zero takes the default.
func TestNewValidates(t *testing.T) {
	ok := func(edit func(*Config)) Config {
		c := Config{Addresses: []string{"h:1"}, Stream: "s", Service: "c"}
		edit(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no addresses", Config{Stream: "s", Service: "c"}, "Addresses: at least one"},
		{"bad address", ok(func(c *Config) { c.Addresses = []string{"h:1", "nohostport"} }), `Addresses[1]: "nohostport"`},
		{"bad target", ok(func(c *Config) { c.Addresses = []string{"dns://"} }), `Addresses[0]: target "dns://"`},
		{"no stream", ok(func(c *Config) { c.Stream = "" }), "Stream: required"},
		{"no service", ok(func(c *Config) { c.Service = "" }), "Service: required"},
		{"token without TLS", ok(func(c *Config) { c.Token = StaticToken("t") }), "Token: needs TLS"},
		{"service too long", ok(func(c *Config) { c.Service = strings.Repeat("x", 257) }), "Service: at most 256 bytes"},
		{"instance too long", ok(func(c *Config) { c.InstanceID = strings.Repeat("x", 257) }), "InstanceID: at most 256 bytes"},
		{"negative PersistInterval", ok(func(c *Config) { c.PersistInterval = -1 }), "PersistInterval: -1ns is negative"},
		{"negative BackoffMin", ok(func(c *Config) { c.BackoffMin = -time.Second }), "BackoffMin: -1s is negative"},
		{"negative BackoffMax", ok(func(c *Config) { c.BackoffMax = -time.Second }), "BackoffMax: -1s is negative"},
		{"negative ReadyIdle", ok(func(c *Config) { c.ReadyIdle = -time.Second }), "ReadyIdle: -1s is negative"},
		{"negative ProgressInterval", ok(func(c *Config) { c.ProgressInterval = -time.Second }), "ProgressInterval: -1s is negative"},
		{"negative RecvWindow", ok(func(c *Config) { c.RecvWindow = -1 }), "RecvWindow: -1 is negative"},
		{"tiny window", ok(func(c *Config) { c.RecvWindow = 1000 }), "RecvWindow: 1000 is outside"},
		{"huge window", ok(func(c *Config) { c.RecvWindow = 1<<30 + 1 }), "RecvWindow: 1073741825 is outside"},
		{"window and dynamic window", ok(func(c *Config) { c.RecvWindow, c.DynamicRecvWindow = 1<<20, true }), "RecvWindow: must be 0 with DynamicRecvWindow"},
		{"progress and no progress", ok(func(c *Config) { c.ProgressInterval, c.DisableProgress = time.Second, true }), "ProgressInterval: must be 0 with DisableProgress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want ErrConfig containing %q", err, tt.want)
			}
		})
	}
	zero := ok(func(*Config) {})
	if err := zero.Validate(); err != nil || zero.PersistInterval != DefaultPersistInterval || zero.BackoffMin != DefaultBackoffMin ||
		zero.BackoffMax != DefaultBackoffMax || zero.ReadyIdle != DefaultReadyIdle || zero.ProgressInterval != DefaultProgressInterval ||
		zero.RecvWindow != DefaultRecvWindow || zero.MaxBatchEntries != DefaultMaxBatchEntries || zero.MaxReceiveBytes != DefaultMaxReceiveBytes {
		t.Errorf("zero values: %v, %+v", err, zero)
	}
	off := ok(func(c *Config) { c.DynamicRecvWindow, c.DisableProgress = true, true })
	if err := off.Validate(); err != nil || off.RecvWindow != 0 || off.ProgressInterval != 0 {
		t.Errorf("DynamicRecvWindow, DisableProgress: %v, window %d, progress %v", err, off.RecvWindow, off.ProgressInterval)
	}
	if n := len((&Client{cfg: off}).dialOptions()); n != 0 {
		t.Errorf("DynamicRecvWindow still fixes the window: %d dial options", n)
	}
	c := newTestClient(t)
	if _, err := Register(c, "bad name", decodeEvent); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad view name: %v", err)
	}
	if _, err := Register(c, "ok", decodeEvent); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(c, "ok", decodeEvent); !errors.Is(err, ErrConfig) {
		t.Fatalf("duplicate view: %v", err)
	}
}

// TestHandlersMissNothingAcrossRestart: changes queued for a handler when the client
// stops are not lost. The state file holds the last publication whose changes the handler
// completed; the restart hands the handler that state as creates, then the changes after
// it, the unhandled update and delete included.
func TestHandlersMissNothingAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil {
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), ent(2, "2", evJSON(2, "a")), ent(3, "3", evJSON(3, "a"))); err != nil {
				return err
			}
		} else if *h.ResumeIndex >= 8 {
			return s.progress(8)
		}
		return s.batch(ent(6, "1", evJSON(1, "b")), ent(7, "2", ""), ent(8, "4", evJSON(4, "a")))
	})
	type seen struct {
		mu  sync.Mutex
		ops map[string][]string
		n   int
	}
	// The first client's handler fails the changes after the snapshot and would retry them
	// in an hour: they are still pending when the client closes (Close drops them).
	handler := func(sn *seen, fail bool) func(c *Client, v *View[event]) {
		return func(c *Client, v *View[event]) {
			OnChange(v, func(ctx context.Context, ch Change[event]) error {
				if fail && ch.Position > 5 {
					return errors.New("not now")
				}
				sn.mu.Lock()
				defer sn.mu.Unlock()
				sn.ops[ch.Key] = append(sn.ops[ch.Key], ch.Op.String())
				sn.n++
				return nil
			}, WithRetry(2, time.Hour, time.Hour))
		}
	}
	first := &seen{ops: map[string][]string{}}
	c, _ := startClient(t, Config{StateDir: dir, PersistInterval: time.Hour}, handler(first, true), fp)
	eventually(t, "the batch applied and the snapshot's changes handled", func() bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		return c.Position() == 8 && first.n == 3
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	second := &seen{ops: map[string][]string{}}
	c2, _ := startClient(t, Config{StateDir: dir, PersistInterval: time.Hour}, handler(second, false), fp)
	eventually(t, "the restart's changes handled", func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		return c2.Position() == 8 && second.n == 6
	})
	fp.mu.Lock()
	resume := fp.hellos[len(fp.hellos)-1].ResumeIndex
	fp.mu.Unlock()
	if resume == nil || *resume != 5 {
		t.Fatalf("restart resumed from %v, want 5 (the last position the handler completed)", resume)
	}
	second.mu.Lock()
	defer second.mu.Unlock()
	want := map[string][]string{"1": {"create", "update"}, "2": {"create", "delete"}, "3": {"create"}, "4": {"create"}}
	for k, ops := range want {
		if fmt.Sprint(second.ops[k]) != fmt.Sprint(ops) {
			t.Errorf("key %s: the handler saw %v after the restart, want %v", k, second.ops[k], ops)
		}
	}
}
