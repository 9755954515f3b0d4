package distributor

import "fmt"

// fullReason is why a wal cycle reads a view in full instead of re-reading only the rows
// its transactions touched (walSession.full). It decides how the read is published and
// counted: the progress phase (statecast_distributor_read_total's phase label and the
// progress log), the reason label of statecast_distributor_full_rereads_total (String),
// whether a stopped view is read, and whether a rewrite view rewrites.
type fullReason int

const (
	// fullStartup: the session's first cycle reads every view (a reconcile epoch, or a
	// snapshot on an empty topic). Phase snapshot; not counted as a re-read.
	fullStartup fullReason = iota + 1
	// fullReconcile: a reconcile was asked for (the view's cron, Distributor.Reconcile). It
	// reads a stopped view too, and rewrites a view with RefreshMode rewrite. Phase and
	// label reconcile.
	fullReconcile
	// fullRetry: a stopped view's retry is due; a successful read resumes it. Phase
	// reread, label retry.
	fullRetry
	// fullUnmapped: a transaction changed a table the view cannot map to its rows (or sent
	// a change without the values its mapping reads, or truncated a table). Read off the
	// cycles, in the background (wal_behind.go); a stopped view is not read: its retry
	// reads it. Phase reread, label unmapped.
	fullUnmapped
	// fullBulk: a cycle's changes reach a large share of a mapped view's rows: the cycle
	// reads it whole, streamed, and publishes what changed (wal_bulk.go). Phase reread,
	// label bulk.
	fullBulk
	// fullWarm: a session's first cycle reads a view that it continues from the slot
	// without an epoch, to rebuild its reverse maps (wal_start.go): it publishes only the
	// rows that differ from the topic, with no epoch frame. Phase snapshot; not counted as
	// a re-read.
	fullWarm
)

// String is the reason's label value in statecast_distributor_full_rereads_total, which
// docs/operations.md documents and deploy/prometheus/alerts.yaml groups by: unmapped,
// reconcile, retry or bulk (start-up reads are not re-reads and are not counted).
func (r fullReason) String() string {
	switch r {
	case fullStartup, fullWarm:
		return "start-up"
	case fullReconcile:
		return "reconcile"
	case fullRetry:
		return "retry"
	case fullUnmapped:
		return "unmapped"
	case fullBulk:
		return "bulk"
	}
	return fmt.Sprintf("fullReason(%d)", int(r))
}

// phase is the progress phase of a full read done for r (progress, the phase label of
// statecast_distributor_read_total).
func (r fullReason) phase() string {
	switch r {
	case fullStartup, fullWarm:
		return "snapshot"
	case fullReconcile:
		return "reconcile"
	}
	return "reread"
}
