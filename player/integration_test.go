package player

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// runClient keeps a client connected to one of addrs (chosen by pick) until ctx ends,
// disconnecting after a random number of frames when churn is set.
func runClient(ctx context.Context, t *testing.T, c *client, addrs func() string, churn bool, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	for ctx.Err() == nil {
		stop := 0
		if churn {
			stop = 1 + rnd.IntN(40)
		}
		if err := c.session(ctx, addrs(), stop, nil); err != nil && ctx.Err() == nil {
			t.Logf("client %s: session ended: %v", c.id, err)
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestViewsAndChurn: several targets with different views, some of them disconnecting and
// reconnecting at random (some forgetting their state) while records are produced.
func TestViewsAndChurn(t *testing.T) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	e.produce(300, []string{"a", "b", "c"}, 100, rnd) // history before the player starts
	tp := startPlayer(t, e, nil)

	clients := []*client{
		newClient("all", e.chk),
		newClient("a", e.chk, "a"),
		newClient("bc", e.chk, "b", "c"),
		newClient("a-churn", e.chk, "a"),
		newClient("all-churn", e.chk),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, t, c, func() string { return tp.addr }, c.id == "a-churn" || c.id == "all-churn", uint64(i))
		}()
	}
	// A client that loses its state now and then (reconnects without resume index).
	amnesiac := newClient("amnesiac", e.chk, "b")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_ = amnesiac.session(ctx, tp.addr, 30, nil)
			if i%3 == 2 {
				amnesiac.mu.Lock()
				amnesiac.hasState, amnesiac.applied = false, -1
				amnesiac.mu.Unlock()
			}
		}
	}()
	for range 40 {
		e.produce(50, []string{"a", "b", "c"}, 100, rnd)
		time.Sleep(20 * time.Millisecond) // pacing, not synchronisation
	}
	last := e.lastOffset()
	for _, c := range append(clients, amnesiac) {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	for _, c := range append(clients, amnesiac) {
		t.Logf("client %s: frames %d applied %d head %d", c.id, c.frames, c.applied, c.maxHead)
		// Every message carries the player's head: never below what it delivers, and at
		// the end the head of the whole log.
		if len(c.headErrs) > 0 || c.maxHead < last {
			t.Errorf("client %s: head_index: max %d (log end %d), errors %v", c.id, c.maxHead, last, c.headErrs)
		}
	}
	t.Logf("status: %+v", tp.p.Status())
	e.check()
}

// TestCaughtUpProgressOnResume: a client that resumes at the head of the log gets a
// Progress frame at once (it is caught up), not only after ProgressInterval or the next
// record.
func TestCaughtUpProgressOnResume(t *testing.T) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(21, 22))
	e.produce(50, []string{"a", "b"}, 100, rnd)
	tp := startPlayer(t, e, func(c *Config) { c.ProgressInterval = time.Hour })
	last := e.lastOffset()
	c := newClient("resumer", e.chk, "a")
	sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= last })
	c.mu.Lock()
	before := c.frames
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.session(ctx, tp.addr, 1, nil); err != nil || ctx.Err() != nil {
		t.Fatalf("resumed session: %v (ctx %v)", err, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frames != before+1 || c.applied != last {
		t.Fatalf("resumed at %d: %d frames, applied %d", last, c.frames-before, c.applied)
	}
	e.check()
}
