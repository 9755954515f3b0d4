package capture

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func TestLookups(t *testing.T) {
	ctx, conn, _ := openDB(t)
	mustExec(ctx, t, conn, `
INSERT INTO sports VALUES (1, 'Football'), (2, 'Tennis');
INSERT INTO competitions VALUES (10, 1, 'League'), (11, 1, 'Cup'), (20, 2, 'Open');
INSERT INTO events VALUES (100, 10, 'A-B'), (101, 10, 'C-D'), (110, 11, 'E-F'), (200, 20, 'G-H');
INSERT INTO markets VALUES (1000, 100, 'winner', 1.5), (1001, 100, 'total', 2), (1010, 101, 'winner', 3), (1100, 110, 'winner', 4), (2000, 200, 'winner', 5);
CREATE TABLE keyed (k bytea, at timestamptz, label text, PRIMARY KEY (k, at));
INSERT INTO keyed VALUES ('\x00ff7c'::bytea, '2026-11-30 10:00:00.123456+00', 'x'), ('\x01'::bytea, '2026-11-30 11:00:00+00', 'y');`)
	sql := `SELECT m.id, m.name, e.id AS event_id, c.id AS comp_id, c.name AS comp
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`
	d, err := analyze(ctx, t, conn, ViewSpec{Name: "m", SQL: sql, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids := func(l *Lookup, tuples [][][]byte) string {
		t.Helper()
		var got []string
		if err := l.Run(ctx, tx, tuples, func(row [][]byte) error {
			got = append(got, fmt.Sprint(int64(binary.BigEndian.Uint64(row[0]))))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return strings.Join(got, ",")
	}
	byComp, err := NewLookup(d, sql, d.Maps[d.tableOID(t, "competitions")][0].Cols)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byComp, [][][]byte{{be32(10)}, {be32(99)}}); got != "1000,1001,1010" {
		t.Fatalf("markets of competition 10 = %s", got)
	}
	byEvent, err := NewLookup(d, sql, d.Maps[d.tableOID(t, "events")][0].Cols)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byEvent, [][][]byte{{be64(110)}, {be64(200)}}); got != "1100,2000" {
		t.Fatalf("markets of events 110, 200 = %s", got)
	}
	byKey, err := NewKeyLookup(d, sql)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byKey, [][][]byte{{[]byte("1001")}, {[]byte("2000")}, {[]byte("5")}}); got != "1001,2000" {
		t.Fatalf("markets by key = %s", got)
	}
	// Many tuples: sent in chunks.
	var many [][][]byte
	for i := 0; i < 2*lookupChunk+5; i++ {
		many = append(many, [][]byte{be64(int64(900000 + i))})
	}
	many = append(many, [][]byte{be64(1000)})
	if got := ids(byEvent, many); got != "" {
		t.Fatalf("lookup of unknown events = %s", got)
	}
	if got := ids(byKey, [][][]byte{{[]byte("1000")}}); got != "1000" {
		t.Fatal(got)
	}

	// Composite key texts of types whose text is not PostgreSQL's literal as is (base64
	// bytea, RFC 3339 times).
	ksql := "SELECT k, at, label FROM keyed"
	kd, err := analyze(ctx, t, conn, ViewSpec{Name: "k", SQL: ksql, Key: []string{"k", "at"}})
	if err != nil {
		t.Fatal(err)
	}
	kl, err := NewKeyLookup(kd, ksql)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	if err := kl.Run(ctx, tx, [][][]byte{{[]byte("AP98"), []byte("2026-11-30T10:00:00.123456Z")}, {[]byte("AQ=="), []byte("2026-11-30T11:00:01Z")}}, func(row [][]byte) error {
		labels = append(labels, string(row[2]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(labels, ",") != "x" {
		t.Fatalf("keyed lookup = %q, want x", labels)
	}
}

func (d *ViewDeps) tableOID(t *testing.T, name string) uint32 {
	t.Helper()
	for _, tb := range d.Tables {
		if tb.Name == name {
			return tb.OID
		}
	}
	t.Fatalf("no table %s", name)
	return 0
}

// TestLookupPlan: a view that joins back an aggregate (which PostgreSQL filters by a
// constant, not by an array) and a plain join are looked up one value at a time up to some
// number of values, a lookup by a column no index serves is not (each value would scan the
// table), and every way reads the same rows as the lookup by arrays.
func TestLookupPlan(t *testing.T) {
	ctx, conn, _ := openDB(t)
	mustExec(ctx, t, conn, `
INSERT INTO sports VALUES (1, 'Football');
INSERT INTO competitions VALUES (10, 1, 'League');
INSERT INTO events SELECT i, 10, 'e' || i FROM generate_series(1, 20000) i;
INSERT INTO markets SELECT i, 1 + i % 20000, 'm', i FROM generate_series(1, 100000) i;
CREATE INDEX ON markets (event_id);
ANALYZE events; ANALYZE markets;`)
	agg := `WITH ms AS (SELECT event_id, count(*) AS n FROM markets GROUP BY event_id) SELECT e.id, ms.n FROM events e JOIN ms ON ms.event_id = e.id`
	plain := `SELECT m.id, m.event_id, e.name FROM markets m JOIN events e ON e.id = m.event_id`
	unindexed := `SELECT m.id, m.price::bigint AS price FROM markets m`
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, tc := range []struct {
		name, sql string
		by        string
		perValue  bool
	}{{"aggregate joined back", agg, "id", true}, {"plain join", plain, "id", true}, {"unindexed column", unindexed, "price", false}} {
		d, err := Analyze(ctx, tx, ViewSpec{Name: "v", SQL: tc.sql, Key: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		by := slices.IndexFunc(d.Columns, func(c Column) bool { return c.Name == tc.by })
		l, err := NewLookup(d, tc.sql, []int{by})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Plan(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if got := l.PerValue() > 10; got != tc.perValue {
			t.Fatalf("%s: one value at a time up to %d tuples, want per value %v", tc.name, l.PerValue(), tc.perValue)
		}
		tuples := [][][]byte{{be64(7)}, {be64(123)}, {be64(2999)}, {be64(99999)}, {nil}}
		read := func() string {
			var got []string
			if err := l.Run(ctx, tx, tuples, func(row [][]byte) error {
				got = append(got, fmt.Sprintf("%d:%d", int64(binary.BigEndian.Uint64(row[0])), int64(binary.BigEndian.Uint64(row[1]))))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			return strings.Join(got, ",")
		}
		saved := l.perValue
		l.perValue = len(tuples)
		each := read()
		l.perValue = 0
		arrays := read()
		l.perValue = saved
		if each != arrays || each == "" {
			t.Errorf("%s: one at a time %q, by arrays %q", tc.name, each, arrays)
		}
	}
}
