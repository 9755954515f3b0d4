// Package backoff is the one retry backoff of the project: the distributor, the player,
// cacheclient and the sarama adapters wait between tries with it. A wait doubles from a
// Policy's Min up to its Max and is jittered, so that many processes failing at once
// (a broker restart, a failover) do not retry in step; each caller keeps its own bounds.
//
// A Policy is a value and safe for concurrent use; a Backoff counts the attempts of one
// retry loop and belongs to the goroutine that runs it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy bounds the waits of a retry loop. The wait before retry n (n from 0) is
// Min·2ⁿ capped at Max, drawn uniformly from its upper half and never below Min: every
// wait lies in [Min, Max], and waits that have reached Max lie in [Max/2, Max] (or [Min,
// Max] when Min is above Max/2).
type Policy struct {
	// Min is the first wait and the smallest; a zero Min waits 0 (no backoff).
	Min time.Duration
	// Max is the largest wait; a Max below Min is taken as Min (a constant, jittered
	// wait is then impossible and the wait is exactly Min).
	Max time.Duration
}

// Delay returns the wait before retry number attempt (0 for the first retry; a negative
// attempt is taken as 0).
func (p Policy) Delay(attempt int) time.Duration {
	return p.delay(attempt, rand.Int64N)
}

// delay is Delay with the random source (n → [0, n)) given, for tests.
func (p Policy) delay(attempt int, draw func(int64) int64) time.Duration {
	if p.Min <= 0 {
		return 0
	}
	top := max(p.Max, p.Min)
	d := p.Ceiling(attempt)
	j := d - d/2 // the jittered half, [d/2, d]
	if j > 0 {
		d = d/2 + time.Duration(draw(int64(j)+1))
	}
	return min(max(d, p.Min), top)
}

// Ceiling returns the largest wait that Delay may return for attempt: Min·2^attempt capped
// at Max.
func (p Policy) Ceiling(attempt int) time.Duration {
	if p.Min <= 0 {
		return 0
	}
	top := max(p.Max, p.Min)
	d := p.Min
	for i := 0; i < attempt && d < top; i++ {
		d *= 2
	}
	return min(d, top)
}

// Backoff counts the failed attempts of one retry loop: Next returns the wait before the
// next try, Reset starts over (after a success). The zero value of its Policy waits 0.
type Backoff struct {
	Policy
	attempt int
}

// New returns a Backoff of p.
func New(p Policy) *Backoff { return &Backoff{Policy: p} }

// Next returns the wait before the next try and counts the attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Delay(b.attempt)
	if b.Ceiling(b.attempt) < max(b.Max, b.Min) {
		b.attempt++ // stop counting once the ceiling is reached (no overflow)
	}
	return d
}

// Reset starts the loop over: the next wait is the first one again.
func (b *Backoff) Reset() { b.attempt = 0 }

// Sleep waits d or until ctx ends, and reports whether it waited the whole d.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
