package cacheclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cespare/xxhash/v2"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

func TestLSN(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want LSN
		out  string
	}{
		{"16/B374D848", 0x16_B374D848, "16/B374D848"},
		{"0/0", 0, "0/0"},
		{"0/16b3748", 0x16B3748, "0/16B3748"},
		{"FFFFFFFF/FFFFFFFF", ^LSN(0), "FFFFFFFF/FFFFFFFF"},
		{"00000001/0000000A", 1<<32 | 10, "1/A"},
	} {
		got, err := ParseLSN(tt.in)
		if err != nil || got != tt.want || got.String() != tt.out {
			t.Errorf("ParseLSN(%q) = %v (%d), %v; want %s", tt.in, got, uint64(got), err, tt.out)
		}
		var u LSN
		if b, _ := got.MarshalText(); u.UnmarshalText(b) != nil || u != got {
			t.Errorf("text round trip of %v: %v", got, u)
		}
	}
	for _, bad := range []string{"", "/", "1", "1/", "/1", "1/2/3", "g/1", "1/123456789", "-1/1", " 1/1", "1/1 "} {
		if _, err := ParseLSN(bad); !errors.Is(err, ErrInvalidLSN) {
			t.Errorf("ParseLSN(%q): %v, want ErrInvalidLSN", bad, err)
		}
	}
	if a, b := mustLSN(t, "1/0"), mustLSN(t, "0/FFFFFFFF"); a <= b {
		t.Error("LSNs do not order as PostgreSQL's")
	}
}

func FuzzParseLSN(f *testing.F) {
	f.Add("16/B374D848")
	f.Add("0/0")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLSN(s)
		if err != nil {
			return
		}
		if back, err := ParseLSN(l.String()); err != nil || back != l {
			t.Fatalf("%q -> %v -> %v, %v", s, l, back, err)
		}
	})
}

// waitResult runs WaitFor(pos) in a goroutine and returns its result channel.
func waitResult(c *Client, ctx context.Context, pos LSN) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.WaitFor(ctx, pos) }()
	return ch
}

func expectNow(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: WaitFor did not return", what)
		return nil
	}
}

// expectBlocked checks, in a synctest bubble, that WaitFor still waits once everything
// else is blocked: it has seen all there is.
func expectBlocked(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-ch:
		t.Fatalf("%s: WaitFor returned %v, want it still waiting", what, err)
	default:
	}
}

// TestWaitFor: WaitFor returns when the position arrives (with the transaction that
// reaches it, never before), at once when it is already reached, for many waiters at once;
// it fails when the position record that reaches it lists one of the client's views as
// stale (a view of another client does not matter), and when the stream's position
// records carry no source position (polling).
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSteps()
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), posEnt(3, "0/10")); err != nil {
				return err
			}
			if err := st.pause(s); err != nil {
				return err
			}
			if err := s.batch(txnEnt(6, "events", "2", evJSON(2, "a"))); err != nil {
				return err
			}
			if err := st.pause(s); err != nil {
				return err
			}
			if err := s.batch(txnEnt(7, "markets", "m", evJSON(7, "m")), posEnt(8, "0/20")); err != nil {
				return err
			}
			if err := st.pause(s); err != nil {
				return err
			}
			if err := s.batch(posEnt(9, "0/30", "markets", "other")); err != nil {
				return err
			}
			if err := st.pause(s); err != nil {
				return err
			}
			if err := s.batch(posEnt(10, "0/40", "other")); err != nil {
				return err
			}
			if err := st.pause(s); err != nil {
				return err
			}
			return s.batch(posEnt(11, ""))
		})
		c, events, markets := startTwoViews(t, Config{}, fp)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st.at(t, "the snapshot")
		if err := c.WaitFor(ctx, mustLSN(t, "0/10")); err != nil {
			t.Fatalf("WaitFor(0/10) after the snapshot at 0/10: %v", err)
		}
		short, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
		asked := time.Now()
		if err := c.WaitFor(short, mustLSN(t, "0/11")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFor(0/11) at 0/10: %v, want the context's deadline", err)
		}
		if d := time.Since(asked); d != 20*time.Millisecond {
			t.Fatalf("WaitFor(0/11) at 0/10 returned after %v, want at the context's deadline, 20ms", d)
		}
		scancel()
		const waiters = 500
		var wg sync.WaitGroup
		var bad sync.Map
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pos := LSN(0x11 + i%16) // 0/11 .. 0/20: above the snapshot's, reached by the transaction
				if err := c.WaitFor(ctx, pos); err != nil {
					bad.Store(i, err)
					return
				}
				// Returned: the client reflects the transaction that reached pos, in every view.
				if cut := c.Read(); cut.SourcePosition() < pos || markets.In(cut).Len() != 1 || events.In(cut).Len() != 2 {
					bad.Store(i, fmt.Errorf("returned for %v at source %v with %d markets", pos, cut.SourcePosition(), markets.In(cut).Len()))
				}
			}()
		}
		w30 := waitResult(c, ctx, mustLSN(t, "0/30"))
		st.resume()
		st.at(t, "the transaction's first row")
		expectBlocked(t, "inside the transaction", w30)
		st.resume()
		st.at(t, "the position 0/20")
		wg.Wait()
		bad.Range(func(k, v any) bool { t.Errorf("waiter %v: %v", k, v); return true })
		expectBlocked(t, "at 0/20", w30)
		st.resume()
		st.at(t, "the position 0/30 with markets stale")
		err := expectNow(t, "stale view", w30)
		var se *StaleViewError
		if !errors.Is(err, ErrStaleView) || !errors.As(err, &se) || se.View != "markets" || se.Position != mustLSN(t, "0/30") || len(se.Views) != 1 {
			t.Fatalf("WaitFor(0/30) with markets stale: %v", err)
		}
		if err := c.WaitFor(ctx, mustLSN(t, "0/20")); !errors.Is(err, ErrStaleView) {
			t.Fatalf("WaitFor(0/20) while markets is stale: %v", err)
		}
		st.resume()
		st.at(t, "the position 0/40, only another client's view stale")
		if err := c.WaitFor(ctx, mustLSN(t, "0/40")); err != nil {
			t.Fatalf("WaitFor(0/40): %v", err)
		}
		st.resume()
		fp.waitFor(t, "ack 11", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 11 })
		if err := c.WaitFor(ctx, mustLSN(t, "0/1")); !errors.Is(err, ErrNoSourcePosition) {
			t.Fatalf("WaitFor after a position record without lsn: %v, want ErrNoSourcePosition", err)
		}
	})
}

// TestWaitForReleasedByClose: waiters end with ErrClosed when the client closes; a stream
// without position records keeps them waiting until then.
func TestWaitForReleasedByClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
		})
		c, _ := startClient(t, Config{}, nil, fp)
		waitReady(t, c)
		ch := make(chan error, 50)
		for range cap(ch) {
			go func() { ch <- c.WaitFor(context.Background(), 1) }()
		}
		synctest.Wait() // the waiters have seen everything the stream has
		if len(ch) != 0 {
			t.Fatalf("WaitFor returned %v without any position record", <-ch)
		}
		c.Close()
		for range cap(ch) {
			if err := expectNow(t, "close", ch); !errors.Is(err, ErrClosed) {
				t.Fatalf("WaitFor after Close: %v", err)
			}
		}
		if err := c.WaitFor(context.Background(), 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("WaitFor on a closed client: %v", err)
		}
	})
}

// TestSourcePositionPersisted: the applied source position (and stale views) is in the
// state file: a restarted client can answer WaitFor before any position record arrives.
func TestSourcePositionPersisted(t *testing.T) {
	dir := t.TempDir()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil {
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")), posEnt(3, "2/10", "events", "gone"))
		}
		return s.progress(5)
	})
	c, _ := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := readState(b, "s", nil, &memSink{})
	if err != nil || head.index != 5 || !head.src.seen || !head.src.hasLSN || head.src.lsn != mustLSN(t, "2/10") ||
		len(head.src.stale) != 1 || head.src.stale[0] != "events" {
		t.Fatalf("state file head %+v, %v", head, err)
	}
	c2, _ := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c2)
	if sp := c2.Stats().SourcePosition; sp != mustLSN(t, "2/10") {
		t.Fatalf("restarted source position %v", sp)
	}
	if err := c2.WaitFor(context.Background(), mustLSN(t, "2/1")); !errors.Is(err, ErrStaleView) {
		t.Fatalf("WaitFor after the restart: %v, want the saved stale view", err)
	}
}

// TestStateFileV1: a file of format 1 (no source state) is still loaded, with the source
// position unknown.
func TestStateFileV1(t *testing.T) {
	var body []byte
	str := func(s string) { body = binary.AppendUvarint(body, uint64(len(s))); body = append(body, s...) }
	body = append(body, "SCSTATE1"...)
	str("s")
	body = binary.AppendVarint(body, 7)
	body = binary.AppendUvarint(body, 1)
	str("events")
	body = binary.AppendUvarint(body, 1)
	str("1")
	str(evJSON(1, "a"))
	body = binary.BigEndian.AppendUint64(body, xxhash.Sum64(body))
	var sink memSink
	head, _, err := readState(body, "s", nil, &sink)
	if err != nil || head.index != 7 || head.src.seen || sink.rows["events"]["1"] != evJSON(1, "a") {
		t.Fatalf("v1 file: %+v %v %v", head, sink.rows, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFileName), body, 0o644); err != nil {
		t.Fatal(err)
	}
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil || *h.ResumeIndex != 7 {
			return errors.New("want resume 7 from the v1 file")
		}
		return s.progress(7)
	})
	c, v := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c)
	if v.Len() != 1 || c.Stats().SourcePosition != 0 {
		t.Fatalf("len %d source %v", v.Len(), c.Stats().SourcePosition)
	}
	c.Close()
	b, _ := os.ReadFile(filepath.Join(dir, StateFileName))
	if !bytes.HasPrefix(b, []byte(stateMagic)) {
		t.Fatalf("rewritten as %q", b[:8])
	}
}

// TestReadIn: In reads the Cut's version of a view; a Cut of another client panics.
func TestReadIn(t *testing.T) {
	c1 := newTestClient(t)
	v1, _ := Register(c1, "events", decodeEvent)
	c2 := newTestClient(t)
	v2, _ := Register(c2, "events", decodeEvent)
	if v := v1.In(c1.Read()); v.Len() != 0 || v.Position() != -1 {
		t.Fatalf("before Start: len %d position %d", v.Len(), v.Position())
	}
	applyBatch(v2, 3, op{"1", `{"id":1}`})
	c2.applyMu.Lock()
	c2.publish(3)
	c2.applyMu.Unlock()
	if v := v2.In(c2.Read()); v.Len() != 1 || v.Position() != 3 || c2.Read().Position() != 3 {
		t.Fatalf("published: len %d position %d", v.Len(), v.Position())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("In with another client's Cut did not panic")
		}
	}()
	v1.In(c2.Read())
}
