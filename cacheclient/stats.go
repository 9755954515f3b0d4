package cacheclient

import (
	"slices"
	"sync"
	"time"
	"unsafe"
)

// ViewStats describes one view.
type ViewStats struct {
	Name string
	// Selection is what the view subscribes to (Selection.String; "" the whole view).
	Selection string
	Len       int
	// Position is the stream position the view reflects (see View.Position).
	Position int64
	// MemoryBytes estimates the view's memory: key and raw value bytes, plus a fixed cost
	// per entry (the entry struct with the object inline and the trie's share). Heap
	// memory the objects point to is not counted.
	MemoryBytes int64
	// DecodeErrors counts the rows the view's decoder refused (live, snapshot or state
	// file). A refused row is kept out of the view (Get does not find its key) until a
	// later version of the row decodes, so each one is also logged at Error level with the
	// view, the key and the error, and reported to Hooks.OnDecodeError.
	DecodeErrors int64
	// DecodeFailedKeys are the keys of the most recent refused rows (at most
	// MaxDecodeFailedKeys, oldest first, each once).
	DecodeFailedKeys []string
	// HiddenRows is the number of rows the view holds refused right now: rows of the
	// stream that Get does not return.
	HiddenRows int
}

// MaxDecodeFailedKeys bounds ViewStats.DecodeFailedKeys.
const MaxDecodeFailedKeys = 8

// decodeStats records a view's decode failures for ViewStats (any goroutine reads them).
type decodeStats struct {
	mu    sync.Mutex
	count int64
	keys  []string // oldest first, distinct, at most MaxDecodeFailedKeys
}

func (d *decodeStats) add(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	if i := slices.Index(d.keys, key); i >= 0 {
		d.keys = slices.Delete(d.keys, i, i+1)
	} else if len(d.keys) == MaxDecodeFailedKeys {
		d.keys = slices.Delete(d.keys, 0, 1)
	}
	d.keys = append(d.keys, key)
}

func (d *decodeStats) get() (int64, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, slices.Clone(d.keys)
}

// decodeFailed reports a row the decoder refused: counted for the view and the client,
// logged at Error level, handed to Hooks.OnDecodeError.
func (v *View[T]) decodeFailed(key string, index int64, err error) {
	v.decodes.add(key)
	if v.c != nil {
		v.c.decodeError(v.name, key, index, err)
	}
}

// Stats is a snapshot of the client's counters and gauges.
type Stats struct {
	Position int64 // the stream position applied (see Client.Position)
	// SourcePosition is the applied source position: the LSN of the last position record
	// the client published (0 before the first, or when the stream has none). Every view
	// reflects every commit up to it (see WaitFor).
	SourcePosition LSN
	Connected      bool
	Ready          bool
	// EntriesApplied counts entries of live batches; SnapshotsApplied counts snapshots.
	EntriesApplied, Batches, SnapshotsApplied int64
	Resyncs, Reconnects                       int64
	EpochChecks, EpochMismatches              int64
	DecodeErrors, HandlerErrors               int64
	// Panics counts the panics of the service's code (decoders, index functions, change
	// handlers) that the client recovered (see PanicError).
	Panics                  int64
	Persists, PersistErrors int64
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
	Head int64
	// Snapshot is the snapshot being received (a bootstrap or a resync), if any.
	Snapshot SnapshotProgress
	// LastError is why the last subscription stream ended ("" none yet), at LastErrorAt.
	LastError   string
	LastErrorAt time.Time
	// Stopped: the client stopped retrying on a refusal that cannot heal, which LastError
	// names (Client.Err returns it); it stays stopped until Close.
	Stopped bool
	Views   []ViewStats
}

// SnapshotProgress is the progress of a snapshot being received.
type SnapshotProgress struct {
	InProgress bool
	Position   int64         // the snapshot's stream position
	Rows       int64         // rows received so far
	Elapsed    time.Duration // since it began
}

// trieOverheadPerEntry is the average cost per entry beyond the item itself (the key string
// header and the trie nodes amortised), as BenchmarkMemoryPerEntry measures it.
const trieOverheadPerEntry = 40

func (v *View[T]) stats() ViewStats {
	s := v.state.Load()
	var it item[T]
	n, keys := v.decodes.get()
	return ViewStats{Name: v.name, Selection: v.Selection().String(), Len: s.count, Position: s.position,
		MemoryBytes:  v.mem.Load() + int64(s.count)*int64(unsafe.Sizeof(it)+trieOverheadPerEntry),
		DecodeErrors: n, DecodeFailedKeys: keys, HiddenRows: len(s.bad)}
}

// Stats returns the client's counters and gauges. Safe for concurrent use.
func (c *Client) Stats() Stats {
	s := Stats{
		Position: c.applied.Load(), Connected: c.st.connected.Load(), Ready: c.Ready(),
		EntriesApplied: c.st.entries.Load(), Batches: c.st.batches.Load(), SnapshotsApplied: c.st.snapshots.Load(),
		Resyncs: c.st.resyncs.Load(), Reconnects: c.st.reconnects.Load(),
		EpochChecks: c.st.epochOK.Load() + c.st.epochBad.Load(), EpochMismatches: c.st.epochBad.Load(),
		DecodeErrors: c.st.decodeErrs.Load(), HandlerErrors: c.st.handlerErrs.Load(), Panics: c.st.panics.Load(),
		Persists: c.st.persists.Load(), PersistErrors: c.st.persistErrs.Load(),
		Lag: time.Duration(c.st.lastLagNanos.Load()), SourcePosition: c.cut.Load().SourcePosition(),
	}
	if ns := c.st.lastSourceTime.Load(); ns != 0 {
		s.LastSourceTime = time.Unix(0, ns)
		s.Staleness = c.opts.now().Sub(s.LastSourceTime)
	}
	s.Head = c.st.head.Load()
	if ns := c.st.snapStartNanos.Load(); ns != 0 {
		s.Snapshot = SnapshotProgress{InProgress: true, Position: c.st.snapshotTarget.Load(), Rows: c.st.snapRows.Load(),
			Elapsed: c.opts.now().Sub(time.Unix(0, ns))}
	}
	s.Stopped = c.Err() != nil
	if e := c.st.lastErr.Load(); e != nil {
		s.LastError, s.LastErrorAt = e.err, e.at
	}
	if t := max(c.st.snapshotTarget.Load(), s.Head); t > s.Position {
		s.LagEntries = t - max(s.Position, 0)
	}
	for _, v := range c.views {
		s.Views = append(s.Views, v.stats())
	}
	return s
}
