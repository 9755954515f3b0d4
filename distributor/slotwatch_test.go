package distributor

import (
	"testing"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// TestWALClock: the time behind is how long ago the WAL's end was at or below the
// confirmed position; 0 once everything is confirmed; it keeps growing while nothing is
// confirmed, and the observations kept stay bounded.
func TestWALClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var c walClock
	for _, step := range []struct {
		s              int
		end, confirmed capture.LSN
		want           time.Duration
	}{
		{0, 100, 100, 0},                 // all confirmed
		{5, 200, 100, 5 * time.Second},   // the end was at 100 five seconds ago
		{10, 300, 100, 10 * time.Second}, // nothing more confirmed: growing
		{15, 400, 250, 10 * time.Second}, // the last end at or below 250: 200, at 5s
		{20, 400, 400, 0},                // caught up
		{25, 500, 450, 5 * time.Second},  // the end was at 400 at 20s
		{30, 600, 300, 10 * time.Second}, // below everything kept (400 at 20s on): at least since then
	} {
		if got := c.observe(at(step.s), step.end, step.confirmed); got != step.want {
			t.Errorf("at %ds (end %d, confirmed %d): behind %s, want %s", step.s, step.end, step.confirmed, got, step.want)
		}
	}

	var stuck walClock
	for i := range walClockMax * 2 {
		d := stuck.observe(at(i), capture.LSN(1000+i), 10)
		if want := time.Duration(i) * time.Second; d != want {
			t.Fatalf("observation %d: behind %s, want %s (since the first)", i, d, want)
		}
	}
	if n := len(stuck.seen); n > walClockMax+1 {
		t.Errorf("%d observations kept, want at most %d", n, walClockMax+1)
	}
}
