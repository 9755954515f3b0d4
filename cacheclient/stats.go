package cacheclient

import (
	"time"
	"unsafe"
)

// ViewStats describes one view.
type ViewStats struct {
	Name string
	Len  int
	// Position is the stream position the view reflects (see View.Position).
	Position int64
	// MemoryBytes estimates the view's memory: key and raw value bytes, plus a fixed cost
	// per entry (the entry struct with the object inline and the trie's share). Heap
	// memory the objects point to is not counted.
	MemoryBytes int64
}

// Stats is a snapshot of the client's counters and gauges.
type Stats struct {
	Position  int64 // the stream position applied (see Client.Position)
	Connected bool
	Ready     bool
	// EntriesApplied counts entries of live batches; SnapshotsApplied counts snapshots.
	EntriesApplied, Batches, SnapshotsApplied int64
	Resyncs, Reconnects                       int64
	EpochChecks, EpochMismatches              int64
	DecodeErrors, HandlerErrors               int64
	Persists, PersistErrors                   int64
	// LastSourceTime is the source (database snapshot) time of the last applied entry: a
	// row, or a poll/epoch control record (the distributor writes one after each poll, so
	// an idle database still moves it forward).
	LastSourceTime time.Time
	// Staleness is now minus LastSourceTime (0 before the first entry).
	Staleness time.Duration
	// Lag is the delay from source time to publication of the last applied batch.
	Lag time.Duration
	// LagEntries is how far the client's position is below the player's head (head_index
	// of the last frame received; during a snapshot at least the snapshot's position): a
	// difference of stream positions, so an upper bound of the entries behind (positions
	// have gaps).
	LagEntries int64
	// Head is the player's head_index in the last frame received: the stream position of
	// its main fetcher (0: none yet).
	Head  int64
	Views []ViewStats
}

// trieOverheadPerEntry is the average cost per entry beyond the item itself (the key string
// header and the trie nodes amortised), as BenchmarkMemoryPerEntry measures it.
const trieOverheadPerEntry = 40

func (v *View[T]) stats() ViewStats {
	s := v.state.Load()
	var it item[T]
	return ViewStats{Name: v.name, Len: s.count, Position: s.position,
		MemoryBytes: v.mem.Load() + int64(s.count)*int64(unsafe.Sizeof(it)+trieOverheadPerEntry)}
}

// Stats returns the client's counters and gauges. Safe for concurrent use.
func (c *Client) Stats() Stats {
	s := Stats{
		Position: c.applied.Load(), Connected: c.st.connected.Load(), Ready: c.Ready(),
		EntriesApplied: c.st.entries.Load(), Batches: c.st.batches.Load(), SnapshotsApplied: c.st.snapshots.Load(),
		Resyncs: c.st.resyncs.Load(), Reconnects: c.st.reconnects.Load(),
		EpochChecks: c.st.epochOK.Load() + c.st.epochBad.Load(), EpochMismatches: c.st.epochBad.Load(),
		DecodeErrors: c.st.decodeErrs.Load(), HandlerErrors: c.st.handlerErrs.Load(),
		Persists: c.st.persists.Load(), PersistErrors: c.st.persistErrs.Load(),
		Lag: time.Duration(c.st.lastLagNanos.Load()),
	}
	if ns := c.st.lastSourceTime.Load(); ns != 0 {
		s.LastSourceTime = time.Unix(0, ns)
		s.Staleness = c.opts.now().Sub(s.LastSourceTime)
	}
	s.Head = c.st.head.Load()
	if t := max(c.st.snapshotTarget.Load(), s.Head); t > s.Position {
		s.LagEntries = t - max(s.Position, 0)
	}
	for _, v := range c.views {
		s.Views = append(s.Views, v.stats())
	}
	return s
}
