package player

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestPositionsToEveryTarget: position records go to every target whatever its views —
// live, in a snapshot (the latest one), in a recovery from the player's history and in one
// from Kafka (a second player whose history holds almost nothing) — and full batches are
// cut after their last position entry when a source transaction follows it. Targets of
// one view, of two, of all; two of them churn between the players; the delivery checker
// checks every position record like any entry of every target.
func TestPositionsToEveryTarget(t *testing.T) {
	e := newEnv(t, nil)
	views := []string{"a", "b", "c"}
	rnd := newRand(31)
	e.produceTxns(150, views, rnd) // history before the players start
	tp := startPlayer(t, e, nil)
	tpk := startPlayer(t, e, func(c *Config) { c.HistoryBytes = 1 }) // recoveries read Kafka

	clients := []*client{
		newClient("a", e.chk, "a"),
		newClient("bc", e.chk, "b", "c"),
		newClient("all", e.chk),
		newClient("a-churn", e.chk, "a"),
		newClient("c-churn", e.chk, "c"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range clients {
		c.batch = 5
		churn := c.id == "a-churn" || c.id == "c-churn"
		n := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, t, c, func() string {
				n++
				if churn && n%2 == 0 {
					return tpk.addr
				}
				return tp.addr
			}, churn, uint64(i))
		}()
	}
	for range 20 {
		e.produceTxns(10, views, rnd)
		time.Sleep(20 * time.Millisecond) // pacing, not synchronisation
	}
	last := e.lastOffset()
	for _, c := range clients {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	for _, c := range clients {
		c.mu.Lock()
		t.Logf("client %s: frames %d, position entries %d live, %d in snapshots", c.id, c.frames, c.positions, c.snapPositions)
		if c.positions == 0 || c.snapPositions == 0 || len(c.cutErrs) > 0 {
			t.Errorf("client %s: %d position entries live, %d in snapshots; batches not cut: %v", c.id, c.positions, c.snapPositions, c.cutErrs)
		}
		c.mu.Unlock()
	}
	st := tp.p.Status().Streams[0]
	if want := e.lsnText(); st.SourcePosition != want {
		t.Errorf("status source position %q, want %q", st.SourcePosition, want)
	}
	e.check()
}
