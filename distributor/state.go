package distributor

import (
	"time"

	"github.com/statecast/statecast/schemas/record/pgjson"
)

// viewState is what the distributor knows about a view's publication: the content hash of
// every live key in the topic, the last epoch and the incremental watermark. It is owned by
// the stream's publisher loop (no locking). It changes only after the broker acknowledged.
type viewState struct {
	cfg    *ViewConfig
	hashes map[string]uint64 // record key → record.RowHash of the live value in the topic
	// epoch is the highest epoch number used for the view (begun, maybe not ended).
	epoch uint64
	// ended is the last epoch whose epoch-end is in the topic.
	ended uint64
	// def is the definition (viewDef) that epoch was read with; "" when unknown (an older
	// writer's epoch, or none).
	def string
	// query is the view's query as the session's analysis read it (a wal view's
	// capture.ViewDeps.Definition; "" for a polled view): part of its definition.
	query string
	// watermark is the key text of the highest incremental value published ("" = none).
	watermark string
	// incType is the PostgreSQL type OID of the incremental column (0 until a read saw it).
	incType uint32
	// nulls is the number of rows with a NULL incremental value at the last epoch (-1:
	// none yet in this activation); only to log it when it changes.
	nulls int64
	// enc is the compiled row encoder of the view's query (re-compiled at every epoch).
	enc *pgjson.Encoder

	// failed is why the view is stopped (a *ViewError), nil while it publishes.
	failed error
	// deps are the reverse maps of a wal view's joined tables (wal.go), rebuilt by every
	// full read.
	deps []*depMap
	// depSpecs say which reverse maps a full read builds (the session's analysis).
	depSpecs []depSpec

	nextPoll time.Time // when the next incremental poll is due
	retryAt  time.Time // when a failed reconcile is retried (zero = none)
	failures int       // consecutive failed tries (0 = none): retryBackoff's attempt
}

func newViewState(cfg *ViewConfig) *viewState {
	return &viewState{cfg: cfg, hashes: make(map[string]uint64), nulls: -1}
}

// polled reports whether the view has an incremental poll.
func (s *viewState) polled() bool { return s.cfg.polled() }

// fail records an error and returns the backoff to wait before the next try
// (retryBackoff: jittered, doubling from 100ms up to 30s).
func (s *viewState) fail() time.Duration {
	d := retryWait(s.failures)
	if retryBackoff.Ceiling(s.failures) < retryBackoff.Max {
		s.failures++
	}
	return d
}

func (s *viewState) ok() { s.failures = 0 }
