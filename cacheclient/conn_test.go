package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

func TestBootstrapThenLive(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex != nil {
			return errors.New("unexpected resume")
		}
		if err := s.snapshot(10, ent(3, "1", evJSON(1, "soccer")), ent(7, "2", evJSON(2, "tennis"))); err != nil {
			return err
		}
		return s.batch(ent(11, "3", evJSON(3, "soccer")), ent(12, "2", ""))
	})
	c, v := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "ack 12", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 12 })
	if got := ids(v.ByIndex("sport", "soccer")); got != "1,3" {
		t.Fatalf("soccer = %s", got)
	}
	if _, ok := v.Get("2"); ok || v.Len() != 2 || v.Position() != 12 || c.Position() != 12 {
		t.Fatalf("len %d index %d", v.Len(), v.Position())
	}
	if got := v.IndexValues("sport"); !slices.Equal(got, []string{"soccer"}) {
		t.Fatalf("sport values %v", got)
	}
	st := c.Stats()
	if !st.LastSourceTime.Equal(testSourceTime.AsTime()) || st.Staleness <= 0 || st.EntriesApplied != 2 || st.SnapshotsApplied != 1 || !st.Ready || st.Views[0].Len != 2 || st.Views[0].MemoryBytes <= 0 {
		t.Fatalf("stats %+v", st)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if !slices.Equal(fp.hellos[0].Views, []string{"events"}) || fp.hellos[0].Stream != "s" {
		t.Fatalf("hello %v", fp.hellos[0])
	}
	if fp.acks[0] != 10 {
		t.Fatalf("first ack %d, want the snapshot index 10", fp.acks[0])
	}
}

func TestOrderAnomalyResubscribesFromApplied(t *testing.T) {
	tests := []struct {
		name string
		bad  []*statecastv1.Entry
	}{
		{"index not above applied", []*statecastv1.Entry{ent(20, "x", evJSON(9, "x"))}},
		{"index repeated in batch", []*statecastv1.Entry{ent(22, "x", evJSON(9, "x")), ent(22, "y", evJSON(9, "x"))}},
		{"index decreasing in batch", []*statecastv1.Entry{ent(25, "x", evJSON(9, "x")), ent(23, "y", evJSON(9, "x"))}},
		{"key of another view", []*statecastv1.Entry{{Index: 30, View: "events", Kind: statecastv1.Kind_KIND_ROW, Key: []byte("other|1"), Value: []byte("{}")}}},
		{"unsubscribed view", []*statecastv1.Entry{{Index: 30, View: "other", Kind: statecastv1.Kind_KIND_ROW, Key: []byte("other|1"), Value: []byte("{}")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
				switch conn {
				case 0:
					if err := s.snapshot(20, ent(1, "1", evJSON(1, "a"))); err != nil {
						return err
					}
					// The bad batch must be refused whole: "x" never appears.
					return s.batch(tt.bad...)
				default:
					if h.ResumeIndex == nil || *h.ResumeIndex != 20 {
						return errors.New("want resume 20")
					}
					return s.batch(ent(21, "2", evJSON(2, "a")))
				}
			})
			c, v := startClient(t, Config{}, nil, fp)
			waitReady(t, c)
			fp.waitFor(t, "ack 21", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 21 })
			if _, ok := v.Get("x"); ok || v.Len() != 2 {
				t.Fatalf("len %d", v.Len())
			}
			if c.Stats().Reconnects < 1 {
				t.Fatal("no reconnect counted")
			}
		})
	}
}

func TestResyncReplacesStateWithDeletes(t *testing.T) {
	var mu sync.Mutex
	var changes []string
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		switch conn {
		case 0:
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), ent(2, "2", evJSON(2, "a"))); err != nil {
				return err
			}
			s.waitAck(5)
			return errors.New("player restarts")
		default:
			if h.ResumeIndex == nil || *h.ResumeIndex != 5 {
				return errors.New("want resume 5")
			}
			if err := s.resync(statecastv1.ResyncRequired_REASON_PAST_TOMBSTONE_HORIZON); err != nil {
				return err
			}
			return s.snapshot(50, ent(40, "2", evJSON(2, "b")), ent(41, "3", evJSON(3, "a")))
		}
	})
	c, v := startClient(t, Config{}, func(c *Client, v *View[event]) {
		OnChange(v, func(_ context.Context, ch Change[event]) error {
			mu.Lock()
			changes = append(changes, ch.Op.String()+":"+ch.Key)
			mu.Unlock()
			return nil
		})
	}, fp)
	waitReady(t, c)
	fp.waitFor(t, "ack 50", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 50 })
	eventually(t, "5 changes", func() bool { mu.Lock(); defer mu.Unlock(); return len(changes) == 5 })
	if _, ok := v.Get("1"); ok {
		t.Fatal("key 1 absent from the snapshot survived")
	}
	if got := ids(v.ByIndex("sport", "a")); got != "3" {
		t.Fatalf("sport a = %s", got)
	}
	mu.Lock()
	got := slices.Clone(changes)
	mu.Unlock()
	slices.Sort(got[2:])
	want := []string{"create:1", "create:2", "create:3", "delete:1", "update:2"}
	slices.Sort(got[:2])
	if !slices.Equal(got[:2], want[:2]) || !slices.Equal(got[2:], want[2:]) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if st := c.Stats(); st.Resyncs != 1 || st.SnapshotsApplied != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEpochMismatchRepairsWithFreshSnapshot(t *testing.T) {
	good := record.RowHash([]byte("events|1"), []byte(evJSON(1, "a")))
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		switch conn {
		case 0:
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
				return err
			}
			// The epoch says the view holds rows 1 and 9: the client misses 9.
			return s.batch(ent(6, "1", evJSON(1, "a")), epochEndEntry(7, 2, good+12345))
		case 1:
			if h.ResumeIndex != nil {
				return errors.New("want a fresh snapshot after a mismatch")
			}
			return s.snapshot(8, ent(1, "1", evJSON(1, "a")), ent(3, "9", evJSON(9, "a")))
		}
		return errors.New("too many streams")
	})
	c, v := startClient(t, Config{}, nil, fp)
	fp.waitFor(t, "ack 8", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 8 })
	waitReady(t, c)
	if v.Len() != 2 {
		t.Fatalf("len %d", v.Len())
	}
	if st := c.Stats(); st.EpochMismatches != 1 || st.EpochChecks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEpochMatchPasses(t *testing.T) {
	h := record.RowHash([]byte("events|1"), []byte(evJSON(1, "a"))) + record.RowHash([]byte("events|2"), []byte(`{bad`))
	fp := startFake(t, func(conn int, _ *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
			return err
		}
		// A row the decoder refuses still counts in the epoch.
		return s.batch(ent(6, "2", `{bad`), epochEndEntry(7, 2, h))
	})
	c, v := startClient(t, Config{}, nil, fp)
	fp.waitFor(t, "ack 7", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 7 })
	if st := c.Stats(); st.EpochMismatches != 0 || st.EpochChecks != 1 || st.DecodeErrors != 1 || v.Len() != 1 {
		t.Fatalf("stats %+v len %d", st, v.Len())
	}
}

func TestFailoverResumesOnOtherPlayer(t *testing.T) {
	a := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if conn == 0 {
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
				return err
			}
			if err := s.batch(ent(6, "2", evJSON(2, "a"))); err != nil {
				return err
			}
			s.waitAck(6)
		}
		return errors.New("player a is going away")
	})
	b := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil || *h.ResumeIndex != 6 {
			return errors.New("want resume 6")
		}
		return s.batch(ent(9, "3", evJSON(3, "a")))
	})
	c, v := startClient(t, Config{}, nil, a, b)
	b.waitFor(t, "ack 9 on b", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 9 })
	waitReady(t, c)
	if v.Len() != 3 {
		t.Fatalf("len %d", v.Len())
	}
}

func TestSnapshotFramesOutOfPlace(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if conn == 0 {
			// An entry above the snapshot index inside the snapshot: refused, nothing applied.
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")), ent(6, "2", evJSON(2, "a")))
		}
		return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
	})
	c, v := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	if v.Len() != 1 {
		t.Fatalf("len %d", v.Len())
	}
}

func TestResumeReadyOnProgress(t *testing.T) {
	dir := t.TempDir()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil {
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
		}
		if err := s.batch(ent(8, "2", evJSON(2, "a"))); err != nil {
			return err
		}
		return s.progress(12)
	})
	c, _ := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "ack 5", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 5 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	fp.mu.Lock()
	sent := fp.sent
	fp.mu.Unlock()
	c2, v2 := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c2)
	fp.waitFor(t, "ack 12", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 12 })
	if v2.Len() != 2 || v2.Position() != 12 {
		t.Fatalf("len %d index %d", v2.Len(), v2.Position())
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if h := fp.hellos[len(fp.hellos)-1]; h.ResumeIndex == nil || *h.ResumeIndex != 5 {
		t.Fatalf("restart hello %v, want resume 5", h)
	}
	if fp.sent-sent != 1 {
		t.Fatalf("restart received %d rows, want only the 1 after the saved index", fp.sent-sent)
	}
}

// TestLagEntriesFromHead: Stats.LagEntries is the player's head_index (of the last frame)
// minus the applied index, and 0 once the client has applied up to the head.
func TestLagEntriesFromHead(t *testing.T) {
	next := make(chan struct{})
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(10, ent(3, "1", evJSON(1, "soccer"))); err != nil {
			return err
		}
		b := &statecastv1.Batch{Entries: []*statecastv1.Entry{ent(11, "2", evJSON(2, "tennis"))}}
		if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: b}, HeadIndex: 40}); err != nil {
			return err
		}
		<-next
		return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 40}}, HeadIndex: 40})
	})
	c, _ := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "ack 11", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 11 })
	if st := c.Stats(); st.LagEntries != 29 || st.Position != 11 {
		t.Fatalf("at index 11 with head 40: lag %d index %d", st.LagEntries, st.Position)
	}
	close(next)
	fp.waitFor(t, "ack 40", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 40 })
	if st := c.Stats(); st.LagEntries != 0 || st.Position != 40 {
		t.Fatalf("after the progress to the head: lag %d index %d", st.LagEntries, st.Position)
	}
}

// TestEpochMismatchAfterRestartBootstraps: a client restarted from its state file resumes
// from the file's index; after an epoch mismatch it must resubscribe without any resume
// index (a fresh snapshot), not from the file's index again.
func TestEpochMismatchAfterRestartBootstraps(t *testing.T) {
	dir := t.TempDir()
	good := record.RowHash([]byte("events|1"), []byte(evJSON(1, "a")))
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		switch conn {
		case 0: // first client: bootstrap, then its state file is written at Close
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
		case 1: // restarted client: resumes at 5; the epoch says it misses row 9
			if h.ResumeIndex == nil || *h.ResumeIndex != 5 {
				return errors.New("want resume 5 after the restart")
			}
			return s.batch(ent(6, "1", evJSON(1, "a")), epochEndEntry(7, 2, good+12345))
		case 2:
			if h.ResumeIndex != nil {
				return fmt.Errorf("want a fresh snapshot after a mismatch, got resume %d", *h.ResumeIndex)
			}
			return s.snapshot(8, ent(1, "1", evJSON(1, "a")), ent(3, "9", evJSON(9, "a")))
		}
		return errors.New("too many streams")
	})
	c, _ := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "ack 5", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 5 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, v2 := startClient(t, Config{StateDir: dir}, nil, fp)
	fp.waitFor(t, "ack 8", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 8 })
	waitReady(t, c2)
	if v2.Len() != 2 {
		t.Fatalf("len %d", v2.Len())
	}
	if st := c2.Stats(); st.EpochMismatches != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestGetTakesTheKeyText: Get takes the key text (the record key without its view prefix,
// each key column escaped), a one-column key included: Get(Key(sport)) finds the row of a
// sport "a|b:c d", Get("a|b:c d") does not; a text without "|" or "\" is its own key text.
func TestGetTakesTheKeyText(t *testing.T) {
	const sport = "a|b:c d"
	rowOf := func(index int64, parts ...string) *statecastv1.Entry {
		return &statecastv1.Entry{Index: index, View: "events", Kind: statecastv1.Kind_KIND_ROW,
			Key: record.EncodeKey("events", parts...), Value: []byte(evJSON(int(index), sport))}
	}
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		return s.snapshot(10, rowOf(3, sport), rowOf(4, `x\y`, "2"), rowOf(5, "plain"))
	})
	c, v := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	if got := Key(sport); got != `a\|b:c d` {
		t.Fatalf("Key(%q) = %q", sport, got)
	}
	if e, ok := v.Get(Key(sport)); !ok || e.ID != 3 {
		t.Fatalf("Get(Key(%q)) = %+v, %v", sport, e, ok)
	}
	if _, ok := v.Get(sport); ok {
		t.Fatalf("Get(%q) found a row: the raw column text is not the key text", sport)
	}
	if e, ok := v.Get(Key(`x\y`, "2")); !ok || e.ID != 4 {
		t.Fatalf("Get(Key(x\\y, 2)) = %+v, %v", e, ok)
	}
	if _, ok := v.Get(`x\y|2`); ok {
		t.Fatal(`Get("x\y|2") found a row: the columns are escaped before they are joined`)
	}
	if e, ok := v.Get("plain"); !ok || e.ID != 5 {
		t.Fatalf(`Get("plain") = %+v, %v`, e, ok)
	}
	var got [][]string
	v.Range(func(k string, _ event) bool {
		parts, err := SplitKey(k)
		if err != nil {
			t.Errorf("SplitKey(%q): %v", k, err)
		}
		got = append(got, parts)
		return true
	})
	slices.SortFunc(got, slices.Compare)
	if want := [][]string{{sport}, {"plain"}, {`x\y`, "2"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the keys split into %q, want %q", got, want)
	}
}

// TestSourceTimeFarFuture: a source time past what nanoseconds since 1970 hold (any
// producer may write one) saturates in Stats instead of wrapping to a year before 1970.
func TestSourceTimeFarFuture(t *testing.T) {
	far := timestamppb.New(time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC))
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(1); err != nil {
			return err
		}
		e := ent(2, "1", evJSON(1, "a"))
		e.SourceTime = far
		return s.batch(e)
	})
	c, _ := startClient(t, Config{}, nil, fp)
	eventually(t, "the batch", func() bool { return c.Position() >= 2 })
	if st := c.Stats(); st.LastSourceTime.Year() < 2262 {
		t.Fatalf("LastSourceTime %v for a source time in year 9000", st.LastSourceTime)
	}
}

// TestResumeReadyAtHeadNotIdle: after a resume, a slow recovery (the player sends part of
// the backlog, then nothing for longer than ReadyIdle) does not count as caught up: the
// client is ready once its applied position reaches the head_index of the first frame.
func TestResumeReadyAtHeadNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		gap := make(chan struct{})
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if h.ResumeIndex == nil {
				return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
			}
			head := func(m *statecastv1.SubscribeResponse) *statecastv1.SubscribeResponse { m.HeadIndex = 20; return m }
			batch := func(es ...*statecastv1.Entry) *statecastv1.SubscribeResponse {
				return head(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}})
			}
			if err := s.send(batch(ent(8, "2", evJSON(2, "a")))); err != nil {
				return err
			}
			select { // the recovery is slow: nothing for many ReadyIdle periods
			case <-gap:
			case <-s.s.Context().Done():
				return s.s.Context().Err()
			}
			if err := s.send(batch(ent(15, "3", evJSON(3, "a")))); err != nil {
				return err
			}
			return s.send(batch(ent(20, "4", evJSON(4, "a"))))
		})
		c, _ := startClient(t, Config{StateDir: dir}, nil, fp)
		waitReady(t, c)
		fp.waitFor(t, "ack 5", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 5 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c2, v2 := startClient(t, Config{StateDir: dir, ReadyIdle: 20 * time.Millisecond}, nil, fp)
		fp.waitFor(t, "ack 8", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 8 })
		time.Sleep(300 * time.Millisecond) // 15 × ReadyIdle without a frame (virtual)
		synctest.Wait()
		if c2.Ready() {
			t.Fatalf("ready at index %d, behind the head 20 the player had at subscribe", c2.Position())
		}
		close(gap)
		waitReady(t, c2)
		if c2.Position() != 20 || v2.Len() != 4 {
			t.Fatalf("ready at index %d with %d rows, want 20 and 4", c2.Position(), v2.Len())
		}
	})
}
