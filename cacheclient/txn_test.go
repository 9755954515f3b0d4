package cacheclient

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// txnEnt is a row of a source transaction (sc-txn) of view; value "" is a tombstone.
func txnEnt(index int64, view, key, value string) *statecastv1.Entry {
	return &statecastv1.Entry{Index: index, View: view, Kind: statecastv1.Kind_KIND_ROW, Key: []byte(view + "|" + key),
		Value: []byte(value), Tombstone: value == "", SourceTime: testSourceTime, Txn: true}
}

// posEnt is a position entry with source position lsn ("" for none) and stale views.
func posEnt(index int64, lsn string, stale ...string) *statecastv1.Entry {
	return &statecastv1.Entry{Index: index, Kind: statecastv1.Kind_KIND_POSITION, Key: record.PositionKey(),
		Value:      (&record.Position{LSN: lsn, Time: testSourceTime.AsTime(), Stale: stale}).Marshal(),
		SourceTime: testSourceTime, SourceLsn: lsn}
}

// startTwoViews starts a client with the views "events" (startClient's) and "markets".
func startTwoViews(t *testing.T, cfg Config, fps ...*fakePlayer) (*Client, *View[event], *View[event]) {
	t.Helper()
	var markets *View[event]
	c, events := startClient(t, cfg, func(c *Client, _ *View[event]) {
		var err error
		if markets, err = Register(c, "markets", decodeEvent); err != nil {
			t.Fatal(err)
		}
	}, fps...)
	return c, events, markets
}

func mustLSN(t *testing.T, s string) LSN {
	t.Helper()
	l, err := ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// steps hands control between a fake player's script and the test.
type steps struct{ reached, next chan struct{} }

func newSteps() *steps { return &steps{reached: make(chan struct{}), next: make(chan struct{})} }

// pause (script side) tells the test a step was reached and waits for it to continue.
func (s *steps) pause(fs *fakeStream) error {
	select {
	case s.reached <- struct{}{}:
	case <-fs.s.Context().Done():
		return fs.s.Context().Err()
	}
	select {
	case <-s.next:
		return nil
	case <-fs.s.Context().Done():
		return fs.s.Context().Err()
	}
}

// at (test side) waits for the script's next pause; resume lets it go on.
func (s *steps) at(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for the script to reach %s", what)
	}
}
func (s *steps) resume() { s.next <- struct{}{} }

// TestTxnAppliedWholeAcrossBatches: the rows of a source transaction, spread over batches
// and over two views, become visible together at its position entry — not at the end of
// the batches that carry its first rows (which the client acks nonetheless, for the send
// window), not at a Progress in between — with the source position.
func TestTxnAppliedWholeAcrossBatches(t *testing.T) {
	st := newSteps()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), posEnt(3, "0/10")); err != nil {
			return err
		}
		if err := s.batch(txnEnt(6, "events", "2", evJSON(2, "a")), txnEnt(7, "markets", "m", evJSON(7, "m"))); err != nil {
			return err
		}
		if err := s.progress(8); err != nil {
			return err
		}
		if err := s.waitAck(8); err != nil {
			return err
		}
		if err := st.pause(s); err != nil {
			return err
		}
		return s.batch(txnEnt(9, "events", "1", ""), txnEnt(10, "events", "3", evJSON(3, "b")), posEnt(11, "1/A"))
	})
	c, events, markets := startTwoViews(t, Config{}, fp)
	waitReady(t, c)
	st.at(t, "the transaction's first batch and a progress, acked")
	if _, ok := events.Get("2"); ok || markets.Len() != 0 || c.Position() != 5 || events.Len() != 1 {
		t.Fatalf("part of an open transaction is visible: events %d markets %d position %d", events.Len(), markets.Len(), c.Position())
	}
	if sp := c.Stats().SourcePosition; sp != mustLSN(t, "0/10") {
		t.Fatalf("source position %v, want the snapshot's 0/10", sp)
	}
	st.resume()
	fp.waitFor(t, "ack 11", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 11 })
	cut := c.Read()
	ev, mk := events.In(cut), markets.In(cut)
	if _, ok := ev.Get("1"); ok || ev.Len() != 2 || mk.Len() != 1 || cut.Position() != 11 || c.Position() != 11 {
		t.Fatalf("after the position entry: events %d markets %d at %d", ev.Len(), mk.Len(), cut.Position())
	}
	if cut.SourcePosition() != mustLSN(t, "1/A") || c.Stats().SourcePosition != LSN(1<<32|10) {
		t.Fatalf("source position %v / %v, want 1/A", cut.SourcePosition(), c.Stats().SourcePosition)
	}
	if st := c.Stats(); st.EntriesApplied != 5 {
		t.Fatalf("entries applied %d, want 5", st.EntriesApplied)
	}
}

// TestTxnCompactedEndsApplyTogether: compaction keeps one position record, so a replay
// can meet two transactions whose first end was compacted away: they apply together at
// the next position entry, never partially.
func TestTxnCompactedEndsApplyTogether(t *testing.T) {
	st := newSteps()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, posEnt(4, "0/4")); err != nil {
			return err
		}
		// Index 8 (the first transaction's position entry) was compacted away.
		if err := s.batch(txnEnt(7, "events", "a", evJSON(1, "x")), txnEnt(9, "markets", "b", evJSON(2, "x"))); err != nil {
			return err
		}
		if err := s.waitAck(9); err != nil {
			return err
		}
		if err := st.pause(s); err != nil {
			return err
		}
		return s.batch(txnEnt(10, "events", "c", evJSON(3, "x")), posEnt(11, "0/11"))
	})
	c, events, markets := startTwoViews(t, Config{}, fp)
	waitReady(t, c)
	st.at(t, "two transactions without the first one's end")
	if events.Len() != 0 || markets.Len() != 0 {
		t.Fatalf("partial application: events %d markets %d", events.Len(), markets.Len())
	}
	st.resume()
	fp.waitFor(t, "ack 11", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 11 })
	if cut := c.Read(); events.In(cut).Len() != 2 || markets.In(cut).Len() != 1 {
		t.Fatalf("after the position entry: events %d markets %d", events.In(cut).Len(), markets.In(cut).Len())
	}
}

// TestTxnSnapshotInsideOpenTransaction: a snapshot whose rows hold part of a transaction
// open at its index (txn rows after its position entry) is published only with the rest of
// the transaction, at the next position entry, and WaitReady waits for that.
func TestTxnSnapshotInsideOpenTransaction(t *testing.T) {
	st := newSteps()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(10, txnEnt(1, "events", "1", evJSON(1, "a")), posEnt(2, "0/2"),
			txnEnt(4, "events", "2", evJSON(2, "a")), txnEnt(5, "markets", "m", evJSON(5, "m"))); err != nil {
			return err
		}
		if err := s.waitAck(10); err != nil {
			return err
		}
		if err := st.pause(s); err != nil {
			return err
		}
		return s.batch(txnEnt(11, "events", "3", evJSON(3, "a")), posEnt(12, "0/5"))
	})
	c, events, markets := startTwoViews(t, Config{}, fp)
	st.at(t, "the snapshot, acked")
	if c.Ready() || events.Len() != 0 || markets.Len() != 0 || c.Position() != -1 || c.Stats().SnapshotsApplied != 0 {
		t.Fatalf("snapshot inside an open transaction visible: ready %v events %d markets %d position %d",
			c.Ready(), events.Len(), markets.Len(), c.Position())
	}
	st.resume()
	waitReady(t, c)
	cut := c.Read()
	if events.In(cut).Len() != 3 || markets.In(cut).Len() != 1 || cut.Position() != 12 || cut.SourcePosition() != mustLSN(t, "0/5") {
		t.Fatalf("after the transaction's end: events %d markets %d at %d source %v",
			events.In(cut).Len(), markets.In(cut).Len(), cut.Position(), cut.SourcePosition())
	}
	if c.Stats().SnapshotsApplied != 1 {
		t.Fatalf("snapshots applied %d", c.Stats().SnapshotsApplied)
	}
}

// TestTxnSnapshotClosedIsReadyAtOnce: txn rows before the snapshot's position entry belong
// to finished transactions: the snapshot is published at its end.
func TestTxnSnapshotClosedIsReadyAtOnce(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		return s.snapshot(10, txnEnt(1, "events", "1", evJSON(1, "a")), ent(3, "2", evJSON(2, "a")), posEnt(4, "0/4"))
	})
	c, v := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	if v.Len() != 2 || c.Position() != 10 || c.Stats().SourcePosition != mustLSN(t, "0/4") {
		t.Fatalf("len %d position %d source %v", v.Len(), c.Position(), c.Stats().SourcePosition)
	}
}

// TestTxnReconnectMidTransaction: a stream that ends inside a transaction drops what was
// staged (never visible) and resumes from the published position, so the transaction is
// received again, whole, and applied at its end.
func TestTxnReconnectMidTransaction(t *testing.T) {
	st := newSteps()
	var mu sync.Mutex
	var changes []string
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		switch conn {
		case 0:
			if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), posEnt(2, "0/2")); err != nil {
				return err
			}
			if err := s.batch(txnEnt(6, "events", "2", evJSON(2, "a")), txnEnt(7, "events", "1", "")); err != nil {
				return err
			}
			if err := s.waitAck(7); err != nil {
				return err
			}
			return errors.New("player goes away inside the transaction")
		default:
			if h.ResumeIndex == nil || *h.ResumeIndex != 5 {
				return errors.New("want resume 5: the published position, not the acked 7")
			}
			if err := st.pause(s); err != nil {
				return err
			}
			return s.batch(txnEnt(6, "events", "2", evJSON(2, "a")), txnEnt(7, "events", "1", ""), posEnt(8, "0/8"))
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
	st.at(t, "the resumed stream")
	if _, ok := v.Get("1"); !ok || v.Len() != 1 || c.Position() != 5 {
		t.Fatalf("the dropped transaction is visible: len %d position %d", v.Len(), c.Position())
	}
	st.resume()
	fp.waitFor(t, "ack 8", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 8 })
	if _, ok := v.Get("1"); ok || v.Len() != 1 || c.Position() != 8 {
		t.Fatalf("after the transaction: len %d position %d", v.Len(), c.Position())
	}
	eventually(t, "3 changes", func() bool { mu.Lock(); defer mu.Unlock(); return len(changes) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if changes[0] != "create:1" || len(changes) != 3 {
		t.Fatalf("changes %v: the dropped transaction's changes reached the handler", changes)
	}
}

// TestTxnResyncInsideTransaction: a resync snapshot that arrives while a transaction is
// staged replaces it: its rows never become visible.
func TestTxnResyncInsideTransaction(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
			return err
		}
		if err := s.batch(txnEnt(6, "events", "x", evJSON(6, "x"))); err != nil {
			return err
		}
		if err := s.resync(statecastv1.ResyncRequired_REASON_BELOW_LOG_START); err != nil {
			return err
		}
		return s.snapshot(20, ent(15, "y", evJSON(15, "y")), posEnt(16, "0/16"))
	})
	c, v := startClient(t, Config{}, nil, fp)
	fp.waitFor(t, "ack 20", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 20 })
	if _, ok := v.Get("x"); ok || v.Len() != 1 || c.Position() != 20 {
		t.Fatalf("len %d position %d", v.Len(), c.Position())
	}
}

// TestTxnEpochCheckOnStagedState: an epoch-end record inside an open transaction is
// checked against everything applied up to it, staged rows included.
func TestTxnEpochCheckOnStagedState(t *testing.T) {
	h := record.RowHash([]byte("events|1"), []byte(evJSON(1, "a"))) + record.RowHash([]byte("events|2"), []byte(evJSON(2, "a")))
	fp := startFake(t, func(conn int, _ *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
			return err
		}
		end := epochEndEntry(7, 2, h)
		end.Txn = true
		return s.batch(txnEnt(6, "events", "2", evJSON(2, "a")), end, posEnt(8, "0/8"))
	})
	c, v := startClient(t, Config{}, nil, fp)
	fp.waitFor(t, "ack 8", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 8 })
	if st := c.Stats(); st.EpochChecks != 1 || st.EpochMismatches != 0 || v.Len() != 2 {
		t.Fatalf("epoch checks %d mismatches %d len %d", st.EpochChecks, st.EpochMismatches, v.Len())
	}
}

// TestReadsDoNotAllocate: a single view's Get costs no allocation, a Cut's read of a view
// none either (View.In's Version stays on the stack): publication of a Cut does not touch
// the single-view read path.
func TestReadsDoNotAllocate(t *testing.T) {
	c := newTestClient(t)
	v, _ := Register(c, "events", decodeEvent)
	applyBatch(v, 1, op{"1", `{"id":1}`})
	c.applyMu.Lock()
	c.publish(1)
	c.applyMu.Unlock()
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := v.Get("1"); !ok {
			t.Fatal("missing")
		}
	}); n != 0 {
		t.Fatalf("View.Get: %v allocations", n)
	}
	if raceEnabled {
		return // View.In is not inlined under the race detector: its Version escapes
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := v.In(c.Read()).Get("1"); !ok {
			t.Fatal("missing")
		}
	}); n != 0 {
		t.Fatalf("View.In(Read()).Get: %v allocations", n)
	}
}
