package distributor

import (
	"context"

	"github.com/statecast/statecast/schemas/record"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCompositeKeyJoin publishes a three-table join with a composite key whose parts need
// escaping, then follows an update through the join.
func TestCompositeKeyJoin(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)`)
	e.exec(`CREATE TABLE products (sku text PRIMARY KEY, title text NOT NULL)`)
	e.exec(`CREATE TABLE orders (customer_id int REFERENCES customers, sku text REFERENCES products,
		qty int NOT NULL, version bigint NOT NULL, PRIMARY KEY (customer_id, sku))`)
	e.exec(`CREATE SEQUENCE ver`)
	e.exec(`INSERT INTO customers VALUES (1, 'Ann'), (2, 'Bob')`)
	e.exec(`INSERT INTO products VALUES ('a|b', 'pipe'), ('a', 'plain'), ('x\y', 'slash')`)
	e.exec(`INSERT INTO orders VALUES (1, 'a|b', 2, nextval('ver')), (1, 'a', 1, nextval('ver')),
		(2, 'x\y', 5, nextval('ver'))`)
	sql := `SELECT o.customer_id, o.sku, c.name AS customer, p.title, o.qty, o.version
		FROM orders o JOIN customers c ON c.id = o.customer_id JOIN products p ON p.sku = o.sku`
	v := ViewConfig{Name: "orders", SQL: sql, Key: []string{"customer_id", "sku"},
		ViewSettings: ViewSettings{Incremental: "version", PollInterval: 50 * time.Millisecond, Overlap: Overlap{Versions: 5, IsCount: true, set: true}}}
	r := start(t, e.config(v))
	r.waitReady(t)
	recs := readAll(t, e.brokers, e.topic)
	got := canonMap(t, rowsOf(recs, "orders"))
	want := e.dbRows("orders", sql, "customer_id", "sku")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot\n got %v\nwant %v", got, want)
	}
	for _, k := range []string{`orders|1|a\|b`, `orders|1|a`, `orders|2|x\\y`} {
		if _, ok := got[k]; !ok {
			t.Errorf("key %q missing (keys %q)", k, sortedKeys(got))
		}
	}
	e.exec(`UPDATE orders SET qty = 7, version = nextval('ver') WHERE customer_id = 1 AND sku = 'a|b'`)
	want = e.dbRows("orders", sql, "customer_id", "sku")
	waitFor(t, e, "the joined update", func(recs []rec) bool {
		return reflect.DeepEqual(canonMap(t, rowsOf(recs, "orders")), want)
	})
}

// TestLateCommit: a transaction that commits after the watermark passed its (older)
// incremental value is still captured thanks to the overlap window, and the rows already
// published are not published again.
func TestLateCommit(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	ctx := context.Background()
	late, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	// the late transaction takes its timestamp now...
	if _, err := late.Exec(ctx, `INSERT INTO items (id, name) VALUES (10, 'late')`); err != nil {
		t.Fatal(err)
	}
	// ...a later one commits first and is published, moving the watermark past it
	conn2 := e.connect()
	if _, err := conn2.Exec(ctx, `INSERT INTO items (id, name) VALUES (11, 'early')`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "row 11", func(recs []rec) bool { return rowsOf(recs, "items")["items|11"] != "" })
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	recs := waitFor(t, e, "late row 10", func(recs []rec) bool { return rowsOf(recs, "items")["items|10"] != "" })
	counts := map[string]int{}
	for _, k := range kinds(recs, "items") {
		counts[k]++
	}
	if counts["row:items|10"] != 1 || counts["row:items|11"] != 1 || counts["row:items|1"] != 1 {
		t.Errorf("publication counts %v (overlap must not republish unchanged rows)", counts)
	}
}

// TestRestart: a restarted distributor rebuilds its state from the topic: unchanged rows
// are not republished, and changes and deletes made while it was down are published by its
// start-up epoch.
func TestRestart(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	cfg := e.config(itemsView())
	r1 := start(t, cfg)
	r1.waitReady(t)
	e.exec(`UPDATE items SET name = 'red apple', updated_at = clock_timestamp() WHERE id = 1`)
	waitFor(t, e, "update", func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "items")["items|1"], "red apple")
	})
	r1.stop(t)
	before := readAll(t, e.brokers, e.topic)

	// unchanged restart: only begin, end and poll records
	r2 := start(t, cfg)
	r2.waitReady(t)
	r2.stop(t)
	recs := readAll(t, e.brokers, e.topic)
	got := kinds(recs[len(before):], "items")
	if want := []string{"epoch-begin", "epoch-end", "poll"}; !reflect.DeepEqual(got[:3], want) {
		t.Fatalf("after restart: %v, want %v first\n%s", got, want, dump(recs[len(before):]))
	}
	for _, k := range got {
		if strings.HasPrefix(k, "row:") || strings.HasPrefix(k, "tomb:") {
			t.Errorf("restart republished %s", k)
		}
	}
	end := lastEnd(t, recs, "items")
	if end.Epoch != 2 || end.Rows != 3 || end.Published != 0 {
		t.Errorf("restart epoch-end %+v", end)
	}

	// changes while down: one update, one delete, one insert with an OLD timestamp
	e.exec(`UPDATE items SET price = 9.99, updated_at = clock_timestamp() WHERE id = 3`)
	e.exec(`DELETE FROM items WHERE id = 2`)
	e.exec(`INSERT INTO items (id, name, updated_at) VALUES (5, 'old', '2000-01-01T00:00:00Z')`)
	n := len(recs)
	r3 := start(t, cfg)
	r3.waitReady(t)
	recs = readAll(t, e.brokers, e.topic)
	got = kinds(recs[n:], "items")
	want := map[string]bool{"row:items|3": true, "tomb:items|2": true, "row:items|5": true}
	for _, k := range got {
		if strings.HasPrefix(k, "row:") || strings.HasPrefix(k, "tomb:") {
			if !want[k] {
				t.Errorf("unexpected %s", k)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing %v in %v", want, got)
	}
	end = lastEnd(t, recs, "items")
	if end.Epoch != 3 || end.Rows != 3 || end.Published != 2 || end.Tombstones != 1 {
		t.Errorf("epoch-end %+v", end)
	}
}

// TestVersionWatermarks: the watermark is the highest incremental value for integer,
// numeric and date columns, and polls pick up newer versions.
func TestVersionWatermarks(t *testing.T) {
	for _, tc := range []struct{ typ, vals, next, want, overlap string }{
		{"numeric(12,3)", "(1, 9.5), (2, 10.25), (3, -1)", "10.5", "10.250", "1"},
		{"int2", "(1, 9), (2, 300), (3, -1)", "301", "300", "0"},
		{"date", "(1, '2026-01-09'), (2, '2026-02-01'), (3, '1999-12-31')", "'2026-02-02'", "2026-02-01", "0s"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			e := newEnv(t)
			e.exec(`CREATE TABLE vt (id int PRIMARY KEY, ver ` + tc.typ + `)`)
			e.exec(`INSERT INTO vt VALUES ` + tc.vals)
			v := ViewConfig{Name: "vt", SQL: "SELECT id, ver FROM vt", Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "ver", PollInterval: 50 * time.Millisecond}}
			var err error
			v.Overlap, err = parseOverlap(tc.overlap)
			if err != nil {
				t.Fatal(err)
			}
			r := start(t, e.config(v))
			r.waitReady(t)
			recs := readAll(t, e.brokers, e.topic)
			p, err := record.ParsePoll(lastPoll(recs, "vt").value)
			if err != nil || p.Watermark != tc.want {
				t.Fatalf("watermark %+v %v, want %s", p, err, tc.want)
			}
			e.exec(`INSERT INTO vt VALUES (4, ` + tc.next + `)`)
			waitFor(t, e, "row 4", func(recs []rec) bool { return rowsOf(recs, "vt")["vt|4"] != "" })
		})
	}
}
