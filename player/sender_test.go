package player

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutinesIn counts this process's goroutines whose stack holds fn (a frame: "name(").
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// TestIdleTargetHasNoSender: a target costs its handler and its receiver while it has
// nothing to send; a sender runs while it has, one at a time, and ends when it is done —
// after a backlog, after live records, and after a target ends.
func TestIdleTargetHasNoSender(t *testing.T) {
	e := newEnv(t, nil)
	rnd := newRand(1)
	last := e.produce(200, []string{"a"}, 20, rnd)
	tp := startPlayer(t, e, nil)
	tp.waitMain(t, last)

	const n = 8
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	cs := make([]*client, n)
	for i := range cs {
		cs[i] = newClient(fmt.Sprintf("c%d", i), e.chk, "a")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cs[i].session(ctx, tp.addr, 0, nil); err != nil && ctx.Err() == nil {
				t.Errorf("%s: session: %v", cs[i].id, err)
			}
		}()
	}
	at := func(index int64) func() bool {
		return func() bool {
			for _, c := range cs {
				if c.Applied() < index {
					return false
				}
			}
			return true
		}
	}
	idle := func(what string) {
		t.Helper()
		waitFor(t, 10*time.Second, what+": no sender runs", func() bool { return goroutinesIn("player.(*target).drain(") == 0 })
		if got := goroutinesIn("player.(*target).receive("); got != n {
			t.Fatalf("%s: %d receivers for %d targets", what, got, n)
		}
		if got := goroutinesIn("player.(*target).serve("); got != n {
			t.Fatalf("%s: %d handlers parked in serve for %d targets", what, got, n)
		}
	}
	waitFor(t, time.Minute, "the clients at the end of the backlog", at(last))
	idle("after the backlog")

	// Live records while the targets are connected, over several seconds of progress
	// messages: senders start, deliver and end.
	for range 5 {
		last = e.produce(100, []string{"a"}, 20, rnd)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, time.Minute, "the clients at the end of the live records", at(last))
	idle("after live records")

	cancel()
	wg.Wait()
	waitFor(t, 10*time.Second, "the targets ended", func() bool {
		return goroutinesIn("player.(*target).receive(") == 0 && goroutinesIn("player.(*target).drain(") == 0
	})
	e.check()
}
