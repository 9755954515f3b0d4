package distributor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/schemas/record"
)

// TestWALBulk: transactions that change every row of a 12,000-row table (above
// bulkMinRows) are read whole and streamed to the producer inside the cycle's Kafka
// transaction (wal_bulk.go). A row
// that stops its view in the middle of the stream (a division by zero in the view's SQL)
// aborts the transaction: no record of it is readable (read_committed), the cycle is
// taken again without the view, which is stale until the row is fixed. An UPDATE of every
// row then reaches the stream as one source transaction, equal to PostgreSQL.
func TestWALBulk(t *testing.T) {
	e := newEnv(t)
	const n = 12_000
	const bad = n / 2
	e.exec(`CREATE TABLE bulk (id bigint PRIMARY KEY, val int NOT NULL, pad text NOT NULL)`)
	e.exec(`INSERT INTO bulk SELECT i, 0, md5(i::text) FROM generate_series(1, $1::int) i`, n)
	views := []ViewConfig{
		// First: its streamed part is sent before the other view's.
		{Name: "ratio", SQL: "SELECT id, val, 100 / (7 - val) AS q FROM bulk", Key: []string{"id"}},
		{Name: "rows", SQL: "SELECT id, val, pad FROM bulk", Key: []string{"id"}},
	}
	reg := prometheus.NewRegistry()
	d, err := New(e.walConfig(views...), WithLogger(testLogger(t)), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	d.sendHook = func(context.Context, string) { sent.Add(1) }
	r := &running{d: d, finished: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.err = d.Run(ctx); close(r.finished) }()
	t.Cleanup(func() { r.stop(t) })
	r.waitReady(t)
	recs := e.waitConverged(t, "the snapshot", views...)
	snapEnd := recs[len(recs)-1].offset

	// Row `bad` makes "ratio" divide by zero; every other row changes in both views.
	before := sent.Load()
	e.exec(`UPDATE bulk SET val = CASE WHEN id = $1 THEN 7 ELSE val + 1 END`, bad)
	recs = waitFor(t, e, "rows published, ratio stopped", func(recs []rec) bool {
		return e.converged(recs, views[1]) && staleIn(t, recs, "ratio")
	})
	for _, rr := range recs {
		if rr.offset > snapEnd && rr.meta.View == "ratio" {
			t.Fatalf("a record of the stopped view is readable: %s", rr)
		}
	}
	// The retried cycle sent rows' n records and a position record; more were sent first,
	// in the aborted transaction: ratio's rows before the bad one.
	if fed := sent.Load() - before - n - 1; fed < bad/2 {
		t.Fatalf("%d records sent before the abort: want the stream to reach the middle of the read (%d)", fed, bad)
	}
	if got := bulkReads(t, reg, e.topic, "rows"); got < 1 {
		t.Fatalf("rows was not read whole (bulk re-reads %v)", got)
	}
	checkGroups(t, recs)

	// Fixed: ratio's retry reads it in full and resumes it.
	e.exec(`UPDATE bulk SET val = 1 WHERE id = $1`, bad)
	e.waitConverged(t, "ratio resumed", views...)

	// Every row again, one source transaction: the changed rows of both views, then one
	// position record.
	e.exec(`UPDATE bulk SET val = val + 1`)
	recs = waitFor(t, e, "every row updated", func(recs []rec) bool {
		return e.converged(recs, views...) && !staleIn(t, recs, "ratio")
	})
	checkGroups(t, recs)
	var lsn string
	for _, rr := range recs {
		if rr.meta.Kind == record.KindRow && rr.meta.View == "rows" && strings.Contains(string(rr.value), `"val":2`) {
			lsn = rr.meta.SourceLSN
		}
	}
	first, last, rows := -1, -1, 0
	for i, rr := range recs {
		if rr.meta.SourceLSN != lsn || rr.meta.Kind == record.KindPosition {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		rows++
	}
	if rows != 2*n {
		t.Fatalf("the UPDATE's source transaction holds %d records, want %d (both views' rows)", rows, 2*n)
	}
	if last-first+1 != rows || recs[last+1].meta.Kind != record.KindPosition || recs[last+1].meta.SourceLSN != lsn {
		t.Fatalf("the UPDATE's records are not one source transaction ending with its position record (records %d..%d, then %s)", first, last, recs[last+1])
	}
	if got := bulkReads(t, reg, e.topic, "ratio"); got < 1 {
		t.Fatalf("ratio was not read whole (bulk re-reads %v)", got)
	}
}

// staleIn reports whether the last position record of recs names view as stale.
func staleIn(t *testing.T, recs []rec, view string) bool {
	t.Helper()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].meta.Kind != record.KindPosition {
			continue
		}
		p, err := record.ParsePosition(recs[i].value)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Stale {
			if v == view {
				return true
			}
		}
		return false
	}
	return false
}

// bulkReads is statecast_distributor_full_rereads_total{reason="bulk"} of a view.
func bulkReads(t *testing.T, reg prometheus.Gatherer, topic, view string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "statecast_distributor_full_rereads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			vals := map[string]string{}
			for _, lp := range m.GetLabel() {
				vals[lp.GetName()] = lp.GetValue()
			}
			if vals["stream"] == topic && vals["view"] == view && vals["reason"] == "bulk" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestWALBulkReverseMaps: a cycle read whole leaves the reverse maps of the view's new
// rows, which the next, mapped cycle needs. A view over children joined to a parent
// maps a parent's change by its column parent_id (= p.id): the rows that hold the
// parent's key now are read by it, those that held it come from a reverse map. One transaction changes every child and moves 50 of the 1,000 to a
// new parent (read whole: past 15 % of the rows); deleting that parent is then one
// change, mapped, and must find those 50 rows through the map the whole read built and
// tombstone them.
func TestWALBulkReverseMaps(t *testing.T) {
	minRows := bulkMinRows
	bulkMinRows = 0 // before the distributor starts; restored after it stopped
	t.Cleanup(func() { bulkMinRows = minRows })
	e := newEnv(t)
	e.exec(`CREATE TABLE bparent (id int PRIMARY KEY, name text NOT NULL)`)
	e.exec(`CREATE TABLE bchild (id int PRIMARY KEY, parent_id int NOT NULL, val int NOT NULL)`)
	e.exec(`INSERT INTO bparent SELECT i, 'p' || i FROM generate_series(1, 10) i`)
	e.exec(`INSERT INTO bchild SELECT i, 1 + i % 10, 0 FROM generate_series(1, 1000) i`)
	view := ViewConfig{Name: "children", Key: []string{"id"},
		SQL: "SELECT c.id, c.val, c.parent_id, p.name FROM bchild c JOIN bparent p ON p.id = c.parent_id"}
	reg := prometheus.NewRegistry()
	d, err := New(e.walConfig(view), WithLogger(testLogger(t)), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	r := &running{d: d, finished: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.err = d.Run(ctx); close(r.finished) }()
	t.Cleanup(func() { r.stop(t) })
	r.waitReady(t)
	e.waitConverged(t, "the snapshot", view)

	e.exec(`BEGIN; INSERT INTO bparent VALUES (11, 'new'); UPDATE bchild SET val = val + 1, parent_id = CASE WHEN id <= 50 THEN 11 ELSE parent_id END; COMMIT`)
	e.waitConverged(t, "every child changed, 50 moved", view)
	if got := bulkReads(t, reg, e.topic, "children"); got != 1 {
		t.Fatalf("the move was read whole %v times, want 1", got)
	}
	e.exec(`DELETE FROM bparent WHERE id = 11`)
	recs := e.waitConverged(t, "the new parent deleted", view)
	if got := bulkReads(t, reg, e.topic, "children"); got != 1 {
		t.Fatalf("the delete was read whole (%v whole reads), want it mapped", got)
	}
	if n := len(rowsOf(recs, "children")); n != 950 {
		t.Fatalf("the view holds %d rows, want 950", n)
	}
}
