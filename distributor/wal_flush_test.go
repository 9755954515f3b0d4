package distributor

import (
	"testing"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// TestStaleWAL: an idle stream asks for a flush only when WAL inserted before its previous
// reading of the positions is still unflushed — not for WAL inserted since (the server's
// WAL writer may flush it yet), not on the first reading, and not when reads are not due.
func TestStaleWAL(t *testing.T) {
	at := time.Unix(1000, 0)
	var s staleWAL
	step := func(d time.Duration, insert, flush capture.LSN, want bool) {
		t.Helper()
		at = at.Add(d)
		if !s.due(at) {
			t.Fatalf("at +%v: not due", d)
		}
		if got := s.observe(at, insert, flush); got != want {
			t.Fatalf("insert %v, flush %v after a reading with insert %v: flush asked %v, want %v", insert, flush, s.inserted, got, want)
		}
	}
	step(0, 200, 100, false)             // first reading: nothing to compare with
	step(staleWALEvery, 300, 200, false) // what was inserted at the last reading is flushed now
	step(staleWALEvery, 300, 250, true)  // 300 inserted a reading ago, still unflushed
	step(staleWALEvery, 300, 300, false) // flushed
	step(staleWALEvery, 400, 300, false) // only new WAL is unflushed
	if s.due(at.Add(100 * time.Millisecond)) {
		t.Fatal("due 100ms after a reading, with staleWALEvery = 250ms")
	}
}
