package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestBatch: the lookups of several members run in rounds of one pipeline and find what
// each finds alone; a member whose statement fails gets its error alone (the round rolls
// back to its savepoint and the statements after it run again); a member that submits
// twice takes part in two rounds; the transaction is left at its top level; per-value lookups are prepared once per connection and
// reused by later batches; a prepared statement whose result columns a schema change
// altered is ErrColumnsChanged, and the next batch prepares it anew.
func TestBatch(t *testing.T) {
	ctx, conn, _ := openDB(t)
	mustExec(ctx, t, conn, `
INSERT INTO sports VALUES (1, 'Football'), (2, 'Tennis');
INSERT INTO competitions VALUES (10, 1, 'League'), (11, 1, 'Cup'), (20, 2, 'Open');
INSERT INTO events VALUES (100, 10, 'A-B'), (101, 10, 'C-D'), (110, 11, 'E-F'), (200, 20, 'G-H');
INSERT INTO markets VALUES (1000, 100, 'winner', 1.5), (1001, 100, 'total', 0), (1010, 101, 'winner', 3), (1100, 110, 'winner', 4), (2000, 200, 'winner', 5);`)
	joined := `SELECT m.id, m.name, e.id AS event_id, c.id AS comp_id FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`
	d, err := analyze(ctx, t, conn, ViewSpec{Name: "m", SQL: joined, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	// A view whose rows divide by the price: market 1001's row fails.
	inverse := `SELECT id, 1 / price AS inv FROM markets`
	di, err := analyze(ctx, t, conn, ViewSpec{Name: "inv", SQL: inverse, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := NewLookup(d, joined, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	byComp, err := NewLookup(d, joined, d.Maps[d.tableOID(t, "competitions")][0].Cols)
	if err != nil {
		t.Fatal(err)
	}
	invByKey, err := NewLookup(di, inverse, di.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Lookup{byKey, byComp, invByKey} {
		l.perValue = 100 // prepared, read one value at a time
	}
	ids := func(rows *[]string) func(row [][]byte) error {
		return func(row [][]byte) error {
			*rows = append(*rows, fmt.Sprint(int64(binary.BigEndian.Uint64(row[0]))))
			return nil
		}
	}
	sorted := func(rows []string) string {
		slices.Sort(rows)
		return strings.Join(rows, ",")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)

	type member struct {
		steps [][]Query // one Run per step
		rows  []string
		err   error
	}
	run := func(members []*member) *Batch {
		t.Helper()
		b := NewBatch(tx, len(members))
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() {
				defer b.Leave(ctx)
				for _, qs := range m.steps {
					if m.err = b.Run(ctx, qs...); m.err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		return b
	}
	var a, bad, two, none member
	a.steps = [][]Query{{{L: byKey, Tuples: [][][]byte{{be64(1000)}, {be64(2000)}, {be64(9)}}, Each: ids(&a.rows)},
		{L: byComp, Tuples: [][][]byte{{be32(11)}}, Each: ids(&a.rows)}}}
	bad.steps = [][]Query{{{L: invByKey, Tuples: [][][]byte{{be64(1000)}, {be64(1001)}}, Each: ids(&bad.rows)}}}
	two.steps = [][]Query{{{L: byComp, Tuples: [][][]byte{{be32(10)}}, Each: ids(&two.rows)}},
		{{L: invByKey, Tuples: [][][]byte{{be64(1010)}}, Each: ids(&two.rows)}}}
	none.steps = [][]Query{{{L: byKey}}} // nothing to look up: no round
	b := run([]*member{&a, &bad, &two, &none})
	if a.err != nil || sorted(a.rows) != "1000,1100,2000" {
		t.Errorf("member a: %v, rows %s; want 1000,1100,2000", a.err, sorted(a.rows))
	}
	var pe *pgconn.PgError
	if !errors.As(bad.err, &pe) || pe.Code != "22012" {
		t.Errorf("member with a division by zero: %v, want its SQLSTATE 22012", bad.err)
	}
	if two.err != nil || sorted(two.rows) != "1000,1001,1010,1010" {
		t.Errorf("member in two rounds: %v, rows %s", two.err, sorted(two.rows))
	}
	if none.err != nil || len(none.rows) != 0 {
		t.Errorf("member with nothing to read: %v, %v", none.err, none.rows)
	}
	if rounds, rolledBack := b.Rounds(); rounds != 2 || rolledBack != 1 {
		t.Errorf("rounds %d, rolled back %d; want 2 rounds, the first rolled back once", rounds, rolledBack)
	}
	// The transaction is back at its top level (a cycle exports its snapshot after its
	// reads), goes on, and the same lookups alone find the same rows.
	var exported string
	if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&exported); err != nil {
		t.Fatalf("export after the batch: %v", err)
	}
	var alone []string
	if err := (TxRunner{Tx: tx}).Run(ctx, Query{L: byKey, Tuples: [][][]byte{{be64(1000)}, {be64(2000)}, {be64(9)}}, Each: ids(&alone)},
		Query{L: byComp, Tuples: [][][]byte{{be32(11)}}, Each: ids(&alone)}); err != nil || sorted(alone) != "1000,1100,2000" {
		t.Fatalf("alone: %v, %s", err, sorted(alone))
	}

	// Prepared once on the connection: a later batch prepares nothing more.
	prepared := func() int {
		t.Helper()
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'statecast_each_%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prepared(); n != 3 {
		t.Fatalf("%d statements prepared, want one per lookup: 3", n)
	}
	var again member
	again.steps = [][]Query{{{L: byKey, Tuples: [][][]byte{{be64(1010)}}, Each: ids(&again.rows)}}}
	run([]*member{&again})
	if again.err != nil || sorted(again.rows) != "1010" || prepared() != 3 {
		t.Fatalf("a later batch: %v, rows %v, %d prepared", again.err, again.rows, prepared())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// A schema change that alters the view's columns under the prepared statement.
	star := `SELECT * FROM events`
	ds, err := analyze(ctx, t, conn, ViewSpec{Name: "ev", SQL: star, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	starKey, err := NewLookup(ds, star, ds.Key)
	if err != nil {
		t.Fatal(err)
	}
	starKey.perValue = 100
	once := func() error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var rows []string
		b := NewBatch(tx, 1)
		defer b.Leave(ctx)
		return b.Run(ctx, Query{L: starKey, Tuples: [][][]byte{{be64(100)}}, Each: ids(&rows)})
	}
	if err := once(); err != nil {
		t.Fatal(err)
	}
	mustExec(ctx, t, conn, `ALTER TABLE events ADD COLUMN note text`)
	if err := once(); !errors.Is(err, ErrColumnsChanged) || errors.As(err, &pe) {
		t.Fatalf("after ADD COLUMN under SELECT *: %v, want ErrColumnsChanged (not a PostgreSQL error of the view)", err)
	}
	// Analyzed again, the view reads with a statement prepared anew.
	ds, err = analyze(ctx, t, conn, ViewSpec{Name: "ev", SQL: star, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if starKey, err = NewLookup(ds, star, ds.Key); err != nil {
		t.Fatal(err)
	}
	starKey.perValue = 100
	if err := once(); err != nil {
		t.Fatalf("analyzed again: %v", err)
	}
}

// TestBatchConnectionError: an error of the connection ends every request of the round.
func TestBatchConnectionError(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	mustExec(ctx, t, conn, `INSERT INTO sports VALUES (1, 'Football')`)
	sql := `SELECT id, name FROM sports`
	d, err := analyze(ctx, t, conn, ViewSpec{Name: "s", SQL: sql, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLookup(d, sql, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", other.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	b := NewBatch(tx, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			defer b.Leave(context.Background())
			errs[i] = b.Run(ctx, Query{L: l, Tuples: [][][]byte{{be32(1)}}, Each: func([][]byte) error { return nil }})
		})
	}
	wg.Wait()
	for i, err := range errs {
		var pe *pgconn.PgError
		if err == nil || errors.As(err, &pe) && !TransientError(pe) {
			t.Errorf("member %d: %v, want the connection's error", i, err)
		}
	}
}
