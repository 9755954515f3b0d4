package distributor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// insertLSN returns the WAL insert position now (what a service reads after its COMMIT to
// wait for its write).
func (e *env) insertLSN() capture.LSN {
	e.t.Helper()
	var s string
	if err := e.db.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	l, err := capture.ParseLSN(s)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// upTo folds the records up to (and including) the first position record at or past pos:
// what a cache holds when its source position reaches pos. ok is false when no position
// record reached pos yet.
func upTo(t *testing.T, recs []rec, pos capture.LSN) (out []rec, ok bool) {
	t.Helper()
	for i, r := range recs {
		if r.meta.Kind != record.KindPosition {
			continue
		}
		p, err := record.ParsePosition(r.value)
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := capture.ParseLSN(p.LSN); l >= pos {
			return recs[:i+1], true
		}
	}
	return nil, false
}

// readYourWrite waits until a position record reaches pos and checks that the records up
// to it already show what check looks for: the position is a sound read-your-writes point.
func (e *env) readYourWrite(t *testing.T, what string, pos capture.LSN, check func(recs []rec) bool) {
	t.Helper()
	waitFor(t, e, what, func(recs []rec) bool {
		upto, ok := upTo(t, recs, pos)
		if !ok {
			return false
		}
		if !check(upto) {
			t.Fatalf("%s: the position record at %s does not show the write:\n%s", what, pos, dump(upto))
		}
		return true
	})
}

// TestWALLateCommit: a long transaction that commits after later ones is published in its
// commit order, and the position of its commit shows it.
func TestWALLateCommit(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	ctx := context.Background()
	long, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close(ctx)
	tx, err := long.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE markets SET price = 99 WHERE id = 100"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.exec("UPDATE markets SET price = price + 1 WHERE id = 200")
	}
	e.waitConverged(t, "the later commits", views...)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	pos := e.insertLSN()
	key := string(record.EncodeKey("event_markets", "100"))
	e.readYourWrite(t, "the long transaction", pos, func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "event_markets")[key], `"price":99`)
	})
	e.waitConverged(t, "everything", views...)
}

// TestWALPositionIdle: with nothing to publish, the source position still follows the
// database's WAL (a write to a table no view reads), within a bounded time.
func TestWALPositionIdle(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	e.exec("CREATE TABLE unrelated (id int PRIMARY KEY)")
	r := start(t, e.walConfig(walViews()...))
	r.waitReady(t)
	e.exec("INSERT INTO unrelated VALUES (1)")
	pos := e.insertLSN()
	start := time.Now()
	waitFor(t, e, "a position past an unrelated write", func(recs []rec) bool { _, ok := upTo(t, recs, pos); return ok })
	t.Logf("position past the write after %s", time.Since(start))
}

// TestWALPositionUnflushed: WAL that no commit follows (here a non-transactional logical
// message; in production a reader's page pruning) is not sent to the slot until the
// server flushes it, which an idle server's WAL writer may not do for seconds. A position
// read with pg_current_wal_insert_lsn() after it still becomes current within a bounded
// time: the idle stream has the server flush it (staleWAL). On a server that other tests
// keep busy, the WAL writer may flush it first.
func TestWALPositionUnflushed(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	r := start(t, e.walConfig(walViews()...))
	r.waitReady(t)
	e.exec("SELECT pg_logical_emit_message(false, 'statecast.test', 'unflushed')")
	pos := e.insertLSN()
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	for {
		if _, ok := upTo(t, readAll(t, e.brokers, e.topic), pos); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no position record at or past %s within 5s of the unflushed write", pos)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("position past the unflushed WAL after %s", time.Since(start))
}

// TestWALAtomicTransaction: the records of one PostgreSQL transaction that changes two
// views form one source transaction: no position record between them.
func TestWALAtomicTransaction(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.exec("BEGIN; UPDATE events SET name = 'Arsenal v Chelsea' WHERE id = 10; UPDATE markets SET price = 77 WHERE id = 200; INSERT INTO events VALUES (13, 2, 'Betis-Celta'); COMMIT")
	recs := e.waitConverged(t, "the transaction", views...)
	checkGroups(t, recs)
	// After the start-up snapshot (ended by the first position record), the only rows are
	// the transaction's: they must all be in one source transaction.
	want := map[string]bool{"open_events|10": true, "open_events|13": true, "event_markets|100": true, "event_markets|101": true, "event_markets|200": true}
	first := -1
	for i, rr := range recs {
		if rr.meta.Kind == record.KindPosition {
			first = i
			break
		}
	}
	groups, got, group := map[int]bool{}, map[string]bool{}, 0
	for _, rr := range recs[first+1:] {
		switch {
		case rr.meta.Kind == record.KindPosition:
			group++
		case rr.meta.Kind == record.KindRow:
			groups[group] = true
			got[rr.key] = true
		}
	}
	if len(groups) != 1 || len(got) != len(want) {
		t.Fatalf("the transaction's rows %v are in %d source transactions, want 1:\n%s", got, len(groups), dump(recs))
	}
}

// TestWALTruncate: TRUNCATE of a base table empties the views that read it (a full re-read).
func TestWALTruncate(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.exec("TRUNCATE markets")
	recs := e.waitConverged(t, "the truncate", views...)
	if len(rowsOf(recs, "event_markets")) != 0 {
		t.Fatalf("rows left after TRUNCATE:\n%s", dump(recs))
	}
}

// TestWALUnmappedJoin: a view that reads a table PostgreSQL's query tree does not show (a
// function's, declared in tables) re-reads in full when that table changes (the view's
// status says so); declaring the column that holds its key (depends) maps it instead.
func TestWALUnmappedJoin(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	e.exec("CREATE FUNCTION competition_name(int) RETURNS text LANGUAGE sql STABLE AS 'SELECT name FROM competitions WHERE id = $1'")
	sql := "SELECT e.id, e.competition_id, e.name, competition_name(e.competition_id) AS competition FROM events e"
	unmapped := ViewConfig{Name: "events_u", SQL: sql, Key: []string{"id"}, Tables: []string{"competitions"}}
	declared := ViewConfig{Name: "events_d", SQL: sql, Key: []string{"id"}, Tables: []string{"competitions"}, Depends: map[string][]string{"competitions": {"competition_id"}}}
	r := start(t, e.walConfig(unmapped, declared))
	r.waitReady(t)
	deps := r.d.Status()[0].Views
	if !strings.Contains(strings.Join(deps[0].Dependencies, "\n"), "competitions: full re-read") ||
		!strings.Contains(strings.Join(deps[1].Dependencies, "\n"), "competitions: by column(s) competition_id = competitions.id (declared in depends)") {
		t.Fatalf("dependencies %q / %q", deps[0].Dependencies, deps[1].Dependencies)
	}
	e.exec("UPDATE competitions SET name = 'EPL' WHERE id = 1")
	recs := e.waitConverged(t, "the renamed competition", unmapped, declared)
	if n := countEnds(recs, "events_u"); n != 2 {
		t.Errorf("events_u: %d epochs, want the start-up one and a re-read", n)
	}
	if n := countEnds(recs, "events_d"); n != 1 {
		t.Errorf("events_d: %d epochs, want only the start-up one (mapped)", n)
	}
}

// TestWALRefusesTableWithoutKey: a view over a table whose updates carry no key refuses to
// start, naming the table and the fix.
func TestWALRefusesTableWithoutKey(t *testing.T) {
	e := newEnv(t)
	e.exec("CREATE TABLE log (at timestamptz, msg text)")
	d, err := New(e.walConfig(ViewConfig{Name: "log", SQL: "SELECT at, msg FROM log", Key: []string{"at"}}), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = d.Run(ctx)
	if !isErr(err, ErrConfig) || !strings.Contains(err.Error(), "log, which has no primary key") || !strings.Contains(err.Error(), "capture: poll") {
		t.Fatalf("Run = %v, want ErrConfig naming the table and the fix", err)
	}
}

// TestWALSharedSlot: two wal streams that name the same slot share it — one slot and one
// walsender for both — and each topic gets its own views' changes.
func TestWALSharedSlot(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	shared := slotName(e.topic) + "_shared"
	dropSlotLater(t, shared)
	second := e.topic + "_b"
	deleteTopicLater(t, e.brokers, second)
	comps := ViewConfig{Name: "competitions", SQL: "SELECT id, name FROM competitions", Key: []string{"id"}}
	cfg.Streams[0].Slot = shared
	cfg.Streams = append(cfg.Streams, StreamConfig{Topic: second, Slot: shared, PositionInterval: 20 * time.Millisecond, Views: []ViewConfig{comps}})
	r := start(t, cfg)
	r.waitReady(t)
	var slots []string
	rows, err := e.db.Query(context.Background(), "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()")
	if err != nil {
		t.Fatal(err)
	}
	if slots, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(slots) != 1 || slots[0] != shared {
		t.Fatalf("slots %v (%v), want only %s", slots, err, shared)
	}
	e.exec("UPDATE competitions SET name = 'EPL' WHERE id = 1")
	e.exec("INSERT INTO markets VALUES (300, 20, 'first goal', 50)")
	e.waitConverged(t, "the first stream", views...)
	b := &env{t: t, dsn: e.dsn, brokers: e.brokers, topic: second, db: e.db}
	recs := b.waitConverged(t, "the second stream", comps)
	checkGroups(t, recs)
	if len(kinds(recs, "event_markets")) != 0 {
		t.Fatalf("the second stream got the first one's views:\n%s", dump(recs))
	}
}

// TestWALRefusesUnknownReadSetting: a read setting PostgreSQL does not know stops the
// start with a configuration error that names it.
func TestWALRefusesUnknownReadSetting(t *testing.T) {
	e := newEnv(t)
	e.exec("CREATE TABLE items (id int PRIMARY KEY, name text)")
	cfg := e.walConfig(ViewConfig{Name: "items", SQL: "SELECT id, name FROM items", Key: []string{"id"}})
	cfg.Streams[0].ReadSettings = map[string]string{"random_page_cost": "1.1", "no_such_setting": "1"}
	d, err := New(cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = d.Run(ctx)
	if !isErr(err, ErrConfig) || !strings.Contains(err.Error(), "read_settings: setting no_such_setting") {
		t.Fatalf("Run = %v, want ErrConfig naming the setting", err)
	}
}

// TestWALBadRowAlone: a statement of one view that fails in a cycle (a row that divides by
// zero) stops that view only: the views read beside it in the same cycle, on the same
// connection, publish the same transaction's rows, and the stopped view resumes once the
// row is fixed.
func TestWALBadRowAlone(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	names := ViewConfig{Name: "names", SQL: "SELECT id, name FROM items", Key: []string{"id"}}
	ratios := ViewConfig{Name: "ratios", SQL: "SELECT id, 100 / length(name) AS r FROM items", Key: []string{"id"}}
	prices := ViewConfig{Name: "prices", SQL: "SELECT id, name, price::int AS p FROM items", Key: []string{"id"}}
	cfg := e.walConfig(names, ratios, prices)
	cfg.Streams[0].ReadConnections = 1
	r := start(t, cfg)
	r.waitReady(t)
	failed := func(name string) string {
		for _, v := range r.d.Status()[0].Views {
			if v.Name == name {
				return v.Failed
			}
		}
		return ""
	}
	e.exec(`UPDATE items SET name = '', price = 9 WHERE id = 1`) // division by zero in ratios
	recs := waitFor(t, e, "names and prices of the emptied name", func(recs []rec) bool {
		return rowsOf(recs, "names")["names|1"] == `{"id":1,"name":""}` && rowsOf(recs, "prices")["prices|1"] == `{"id":1,"name":"","p":9}`
	})
	if f := failed("ratios"); !strings.Contains(f, "division by zero") {
		t.Fatalf("ratios: %q, want it stopped by the division by zero", f)
	}
	if f, g := failed("names"), failed("prices"); f != "" || g != "" {
		t.Fatalf("the views read beside the failing one stopped too: names %q, prices %q", f, g)
	}
	for _, rc := range recs {
		if rc.meta.Kind != record.KindPosition {
			continue
		}
		p, err := record.ParsePosition(rc.value)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.Stale, "names") || slices.Contains(p.Stale, "prices") {
			t.Fatalf("a position record lists a view read beside the failing one as stopped: %v\n%s", p.Stale, dump(recs))
		}
	}
	if got := rowsOf(recs, "ratios")["ratios|1"]; got != `{"id":1,"r":20}` {
		t.Fatalf("ratios|1 = %s, want its last published row", got)
	}
	e.exec(`UPDATE items SET name = 'fixed!' WHERE id = 1`)
	waitCond(t, "ratios resumed", func() bool { return failed("ratios") == "" })
	waitFor(t, e, "ratios of the fixed row", func(recs []rec) bool { return rowsOf(recs, "ratios")["ratios|1"] == `{"id":1,"r":16}` })
}
