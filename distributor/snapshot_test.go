package distributor

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/record"
)

const itemsSQL = "SELECT id, name, price, updated_at FROM items"

func itemsView() ViewConfig {
	return ViewConfig{Name: "items", SQL: itemsSQL, Key: []string{"id"},
		ViewSettings: ViewSettings{Incremental: "updated_at", PollInterval: 50 * time.Millisecond, Overlap: Overlap{Duration: 10 * time.Second, set: true}}}
}

func (e *env) createItems() {
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2),
		updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	e.exec(`INSERT INTO items (id, name, price, updated_at) VALUES
		(1, 'apple', 1.50, '2026-01-01T00:00:01Z'), (2, 'pear|x', 2.00, '2026-01-01T00:00:02Z'),
		(3, 'plum', NULL, '2026-01-01T00:00:03Z')`)
}

func TestSnapshot(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	recs := readAll(t, e.brokers, e.topic)
	want := []string{"epoch-begin", "row:items|1", "row:items|2", "row:items|3", "epoch-end", "poll"}
	got := kinds(recs, "items")
	slices.Sort(got[1:4])
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records:\n%s\nwant kinds %v", dump(recs), want)
	}
	rows := rowsOf(recs, "items")
	if v := rows["items|2"]; v != `{"id":2,"name":"pear|x","price":"2.00","updated_at":"2026-01-01T00:00:02Z"}` {
		t.Errorf("row 2 = %s", v)
	}
	if v := rows["items|3"]; v != `{"id":3,"name":"plum","price":null,"updated_at":"2026-01-01T00:00:03Z"}` {
		t.Errorf("row 3 = %s", v)
	}
	// epoch-end describes the whole view; the hash is the sum of the row hashes
	var sum record.EpochHash
	for k, v := range rows {
		sum.Add(record.RowHash([]byte(k), []byte(v)))
	}
	end := lastEnd(t, recs, "items")
	if end.Epoch != 1 || end.Rows != 3 || end.Hash != sum.Sum() || end.Published != 3 || end.Tombstones != 0 {
		t.Errorf("epoch-end %+v, want epoch 1, 3 rows, hash %x", end, sum.Sum())
	}
	// A polling stream has no source position; its records are one source transaction.
	for _, rc := range recs {
		if rc.meta.SourceLSN != "" || rc.meta.SourceTime.IsZero() {
			t.Errorf("headers of %v: %+v", rc, rc.meta)
		}
		if rc.meta.Kind != record.KindPosition && (rc.meta.Epoch != 1 || !rc.meta.Txn) {
			t.Errorf("headers of %v: %+v", rc, rc.meta)
		}
	}
	if last := recs[len(recs)-1]; last.meta.Kind != record.KindPosition {
		t.Errorf("the epoch does not end with a position record: %v", last)
	}
	p, err := record.ParsePoll(lastPoll(recs, "items").value)
	if err != nil || p.Watermark != "2026-01-01T00:00:03Z" {
		t.Errorf("poll record %+v %v", p, err)
	}
	if !r.d.Active() {
		t.Error("not active")
	}
}

func TestInsertUpdateDelete(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	e.exec(`INSERT INTO items (id, name, price) VALUES (4, 'kiwi', 0.5)`)
	e.exec(`UPDATE items SET name = 'green apple', updated_at = clock_timestamp() WHERE id = 1`)
	waitFor(t, e, "insert and update", func(recs []rec) bool {
		rows := rowsOf(recs, "items")
		return rows["items|4"] != "" && canon(t, rows["items|1"]) != "" &&
			slices.Contains(kinds(recs, "items"), "row:items|4") &&
			len(rows) == 4 && rows["items|1"][len(`{"id":1,"name":"`):][:5] == "green"
	})
	e.exec(`DELETE FROM items WHERE id = 2`)
	// a delete is not seen by the incremental poll: it becomes a tombstone at reconcile
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.d.Reconcile(ctx, "items"); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, e.brokers, e.topic)
	rows := rowsOf(recs, "items")
	if _, ok := rows["items|2"]; ok || len(rows) != 3 {
		t.Fatalf("after reconcile rows %v\n%s", sortedKeys(rows), dump(recs))
	}
	end := lastEnd(t, recs, "items")
	if end.Epoch != 2 || end.Rows != 3 || end.Tombstones != 1 || end.Published != 0 {
		t.Fatalf("reconcile epoch-end %+v (want epoch 2, rows 3, 1 tombstone, nothing else republished)", end)
	}
	// the unchanged rows were published exactly once each, the updated one twice
	counts := map[string]int{}
	for _, k := range kinds(recs, "items") {
		counts[k]++
	}
	if counts["row:items|3"] != 1 || counts["row:items|4"] != 1 || counts["row:items|1"] != 2 || counts["tomb:items|2"] != 1 {
		t.Errorf("publication counts %v", counts)
	}
	if err := r.d.Reconcile(ctx, "nope"); !isErr(err, ErrUnknownView) {
		t.Errorf("Reconcile(nope) = %v", err)
	}
}

// TestVolatileView: a view whose values change at every read (random()) is published as it
// was read, and the epoch-end's hash describes exactly the rows published; a reconcile
// republishes the changed values.
func TestVolatileView(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := ViewConfig{Name: "vol", SQL: "SELECT id, name, random() AS r FROM items", Key: []string{"id"}}
	r := start(t, e.config(v))
	r.waitReady(t)
	check := func(epoch uint64) {
		t.Helper()
		recs := waitFor(t, e, "the epoch's end", func(recs []rec) bool { return countEnds(recs, "vol") == int(epoch) })
		rows := rowsOf(recs, "vol")
		var sum record.EpochHash
		for k, v := range rows {
			sum.Add(record.RowHash([]byte(k), []byte(v)))
		}
		end := lastEnd(t, recs, "vol")
		if end.Epoch != epoch || end.Rows != 3 || end.Hash != sum.Sum() {
			t.Errorf("epoch-end %+v, want epoch %d, 3 rows, hash %x of the published rows", end, epoch, sum.Sum())
		}
	}
	check(1)
	if err := r.d.Reconcile(context.Background(), "vol"); err != nil {
		t.Fatal(err)
	}
	check(2)
}
