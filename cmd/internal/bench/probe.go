package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Probe watches a cache for the row versions transactions wrote and records when each
// transaction became visible: the first time, after a publication of the cache, that a
// read (Look, a cacheclient Get) shows every row it was told to expect of it.
//
// Notify must be called at each publication of the cache (cacheclient's OnBatchApplied and
// OnSnapshot hooks); the probe then reads the pending rows on its own goroutine, so the
// cache's connection goroutine only pays a non-blocking channel send. It also reads them
// every ProbeFallback, which can only make a time later, never earlier.
type Probe struct {
	look func(key string) (version int64, ok bool)

	mu      sync.Mutex
	pending map[string][]expectation // per key, in commit order
	// lanes, for an ordered probe (Ordered): per writer (Txn.Writer), its expectations in
	// the order they were made.
	ordered bool
	lanes   map[int][]laneEntry
	left    int
	empty   chan struct{} // closed when left drops to 0, replaced by Expect

	wake chan struct{}
	stop func()
}

// ProbeFallback is how often a Probe reads its pending rows without a Notify.
const ProbeFallback = 50 * time.Millisecond

type expectation struct {
	version int64
	t       *Txn
}

type laneEntry struct {
	key string
	expectation
}

// NewProbe starts a probe that reads the cache with look: the version a row shows, and
// whether the row is there.
func NewProbe(look func(key string) (version int64, ok bool)) *Probe {
	p := &Probe{look: look, pending: map[string][]expectation{}, empty: make(chan struct{}), wake: make(chan struct{}, 1)}
	close(p.empty)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(ProbeFallback)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-tk.C:
			}
			p.check()
		}
	}()
	p.stop = sync.OnceFunc(func() { cancel(); <-done })
	return p
}

// Ordered makes the probe meet each writer's expectations (by Txn.Writer) in the order
// they were made, reading each writer's pending rows from its oldest and stopping at the
// first one the cache does not show yet. That is exact when a writer's transactions
// commit in the order of its Expect calls and the cache applies commits in commit order
// (the views of one stream, fed by one connection per writer), and it keeps a check's
// cost to the rows it finds, where an unordered probe reads every pending row each time:
// a cache thousands of commits behind is read a few times per writer, not thousands.
// Call it before the first Expect; Absent expectations are not allowed.
func (p *Probe) Ordered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ordered, p.lanes = true, map[int][]laneEntry{}
}

// Close stops the probe's goroutine.
func (p *Probe) Close() { p.stop() }

// Notify tells the probe the cache published something. It never blocks.
func (p *Probe) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Expect adds a row that t makes visible: key must show version or a later one (a key's
// versions grow in commit order), or, for Absent, no row. Call it before t commits, and
// for one key in commit order. The last of a key's expectations that the cache shows is
// met together with every earlier one: the cache applies commits in order. An Absent
// expected after an insert of the same key that is not visible yet would be met by the
// row's absence before the insert, so a workload does not delete a row it has just
// inserted.
func (p *Probe) Expect(t *Txn, key string, version int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		p.empty = make(chan struct{})
	}
	if p.ordered {
		if version == Absent {
			panic("bench: an ordered probe cannot expect a row's absence")
		}
		p.lanes[t.Writer] = append(p.lanes[t.Writer], laneEntry{key: key, expectation: expectation{version: version, t: t}})
	} else {
		p.pending[key] = append(p.pending[key], expectation{version: version, t: t})
	}
	t.expect++
	p.left++
}

// Pending is the number of expectations not met yet.
func (p *Probe) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left
}

// check reads every pending row once.
func (p *Probe) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return
	}
	now := time.Now()
	if p.ordered {
		p.checkLanes(now)
		return
	}
	for key, es := range p.pending {
		v, ok := p.look(key)
		met := -1
		for i := len(es) - 1; i >= 0; i-- {
			if e := es[i]; e.version == Absent && !ok || ok && e.version != Absent && v >= e.version {
				met = i
				break
			}
		}
		if met < 0 {
			continue
		}
		for _, e := range es[:met+1] {
			e.t.expect--
			if e.t.expect == 0 {
				e.t.Visible = now
			}
		}
		p.left -= met + 1
		if met+1 == len(es) {
			delete(p.pending, key)
		} else {
			p.pending[key] = es[met+1:]
		}
	}
	if p.left == 0 {
		close(p.empty)
	}
}

// checkLanes is check of an ordered probe (under its lock).
func (p *Probe) checkLanes(now time.Time) {
	for w, es := range p.lanes {
		n := 0
		for _, e := range es {
			if v, ok := p.look(e.key); !ok || v < e.version {
				break
			}
			e.t.expect--
			if e.t.expect == 0 {
				e.t.Visible = now
			}
			n++
		}
		p.left -= n
		if n == len(es) {
			delete(p.lanes, w)
		} else {
			p.lanes[w] = es[n:]
		}
	}
	if p.left == 0 {
		close(p.empty)
	}
}

// Wait returns once every expectation is met, or an error naming one that is not after
// timeout.
func (p *Probe) Wait(ctx context.Context, timeout time.Duration) error {
	p.mu.Lock()
	empty := p.empty
	p.mu.Unlock()
	select {
	case <-empty:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return nil
	}
	pending := p.pending
	if p.ordered {
		pending = map[string][]expectation{}
		for _, es := range p.lanes {
			pending[es[0].key] = []expectation{es[0].expectation}
		}
	}
	for key, es := range pending {
		v, ok := p.look(key)
		shows := "no row"
		if ok {
			shows = fmt.Sprintf("version %d", v)
		}
		return fmt.Errorf("bench: %d row versions not visible in the cache after %v; e.g. key %s: want version %d (%d = deleted), the cache shows %s",
			p.left, timeout, key, es[0].version, Absent, shows)
	}
	return nil
}
