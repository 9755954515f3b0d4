package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCache is what a Probe reads: key → version, absent when missing.
type fakeCache struct {
	mu   sync.Mutex
	rows map[string]int64
}

func (c *fakeCache) set(key string, v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == Absent {
		delete(c.rows, key)
	} else {
		c.rows[key] = v
	}
}

func (c *fakeCache) look(key string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.rows[key]
	return v, ok
}

func TestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := &fakeCache{rows: map[string]int64{"a": 1, "gone": 1}}
		p := NewProbe(cache.look)
		defer p.Close()
		ctx := context.Background()

		ins := &Txn{Seq: 0}
		p.Expect(ins, "b", 5) // an insert
		upd := &Txn{Seq: 1}
		p.Expect(upd, "a", 6)
		del := &Txn{Seq: 2}
		p.Expect(del, "gone", Absent)
		two := &Txn{Seq: 3} // a transaction of two rows
		p.Expect(two, "a", 7)
		p.Expect(two, "c", 8)
		if n := p.Pending(); n != 5 {
			t.Fatalf("%d pending, want 5", n)
		}

		p.Notify()
		synctest.Wait() // the probe has read the cache and waits again
		if !ins.Visible.IsZero() || !upd.Visible.IsZero() || !del.Visible.IsZero() {
			t.Fatal("visible before the cache shows anything")
		}
		cache.set("b", 5)
		cache.set("gone", Absent)
		notified := time.Now()
		p.Notify()
		synctest.Wait()
		// Read at the Notify, not at the next fallback read: the clock has not moved.
		if n := p.Pending(); n != 3 {
			t.Fatalf("%d pending after the Notify, want 3", n)
		}
		if !ins.Visible.Equal(notified) || !del.Visible.Equal(notified) || !upd.Visible.IsZero() {
			t.Fatalf("notified at %v: insert visible %v, delete %v, update %v", notified, ins.Visible, del.Visible, upd.Visible)
		}
		// The cache jumps to a's later version: the earlier update is met with it; the
		// transaction of two rows waits for its second one.
		cache.set("a", 7)
		p.Notify()
		synctest.Wait()
		if n := p.Pending(); n != 1 {
			t.Fatalf("%d pending after the Notify, want 1", n)
		}
		if upd.Visible.IsZero() || !two.Visible.IsZero() {
			t.Fatalf("update visible %v, two-row transaction %v", upd.Visible, two.Visible)
		}
		waited := time.Now()
		if err := p.Wait(ctx, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "key c: want version 8") {
			t.Fatalf("Wait with c missing: %v", err)
		}
		if d := time.Since(waited); d != 50*time.Millisecond {
			t.Fatalf("Wait with c missing gave up after %v, want its 50ms timeout", d)
		}
		// A later version than expected (versions grow) meets it, without a Notify: the
		// probe also reads every ProbeFallback. The fallback read due at the same instant
		// as the timeout above is let run first.
		synctest.Wait()
		cache.set("c", 9)
		set := time.Now()
		if err := p.Wait(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if d := two.Visible.Sub(set); two.Visible.IsZero() || d <= 0 || d > ProbeFallback {
			t.Fatalf("the two-row transaction visible %v after c was set, want at the next fallback read (every %v)", d, ProbeFallback)
		}
	})
}

// TestProbeOrdered: an ordered probe meets a writer's expectations in the order they were
// made, each writer on its own.
func TestProbeOrdered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := &fakeCache{rows: map[string]int64{}}
		p := NewProbe(cache.look)
		defer p.Close()
		p.Ordered()
		ctx := context.Background()
		a1, a2 := &Txn{Writer: 0}, &Txn{Writer: 0}
		b1 := &Txn{Writer: 1}
		p.Expect(a1, "x", 1)
		p.Expect(a2, "y", 2)
		p.Expect(a2, "x", 2)
		p.Expect(b1, "z", 3)
		// y shows a2's version but x not even a1's: writer 0 waits at a1; writer 1 goes on.
		cache.set("y", 2)
		cache.set("z", 3)
		notified := time.Now()
		p.Notify()
		synctest.Wait()
		if n := p.Pending(); n != 3 {
			t.Fatalf("%d pending after the Notify, want 3", n)
		}
		if !a1.Visible.IsZero() || !a2.Visible.IsZero() || !b1.Visible.Equal(notified) {
			t.Fatalf("notified at %v: a1 visible %v, a2 %v, b1 %v", notified, a1.Visible, a2.Visible, b1.Visible)
		}
		if err := p.Wait(ctx, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "key x: want version 1") {
			t.Fatalf("Wait with x missing: %v", err)
		}
		synctest.Wait()
		cache.set("x", 2)
		if err := p.Wait(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if a1.Visible.IsZero() || !a2.Visible.Equal(a1.Visible) {
			t.Fatalf("writer 0's transactions visible at %v and %v, want both at the same read", a1.Visible, a2.Visible)
		}
	})
}
