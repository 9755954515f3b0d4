package distributor

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestCompaction: with small segments and a low dirty ratio the broker compacts the topic;
// a reader from offset 0 then rebuilds exactly the database's state (updated rows in their
// last version, deleted rows absent).
func TestCompaction(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE kv (k int PRIMARY KEY, v text NOT NULL, ts timestamptz NOT NULL DEFAULT clock_timestamp())`)
	e.exec(`INSERT INTO kv (k, v) SELECT i, 'v0' FROM generate_series(1, 50) i`)
	sql := "SELECT k, v, ts::text AS ts FROM kv"
	view := ViewConfig{Name: "kv", SQL: "SELECT k, v, ts FROM kv", Key: []string{"k"},
		ViewSettings: ViewSettings{Incremental: "ts", PollInterval: 20 * time.Millisecond, Overlap: Overlap{Duration: time.Second, set: true}}}
	cfg := e.config(view)
	cfg.Streams[0].Segment = 100 * time.Millisecond
	cfg.Streams[0].DeleteRetention = 100 * time.Millisecond
	cfg.Streams[0].TopicConfigs = map[string]string{"min.cleanable.dirty.ratio": "0.01"}
	r := start(t, cfg)
	r.waitReady(t)
	for round := 1; round <= 5; round++ {
		e.exec(fmt.Sprintf(`UPDATE kv SET v = 'v%d', ts = clock_timestamp() WHERE k <= 25`, round))
		waitFor(t, e, "round published", func(recs []rec) bool {
			return rowsOf(recs, "kv")["kv|25"] != "" && contains(rowsOf(recs, "kv")["kv|25"], fmt.Sprintf(`"v%d"`, round))
		})
	}
	e.exec(`DELETE FROM kv WHERE k > 40`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.d.Reconcile(ctx, "kv"); err != nil {
		t.Fatal(err)
	}
	// The poll records keep arriving every 20ms, so segments roll and the cleaner runs.
	deadline := time.Now().Add(90 * time.Second)
	var recs []rec
	for {
		recs = readAll(t, e.brokers, e.topic)
		n := 0
		for _, k := range kinds(recs, "kv") {
			if k == "row:kv|1" {
				n++
			}
		}
		if n == 1 {
			break // the five older versions of key 1 were compacted away
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction after 90s: key kv|1 has %d versions", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(recs) >= int(recs[len(recs)-1].offset)+1 {
		t.Fatalf("no offset gaps after compaction")
	}
	// the state rebuilt from offset 0 equals the database
	got := rowsOf(recs, "kv")
	want := e.dbRowsText("kv", sql)
	if len(got) != 40 || !reflect.DeepEqual(keysOf(got), keysOf(want)) {
		t.Fatalf("rebuilt %d keys %v, want %v", len(got), sortedKeys(got), sortedKeys(want))
	}
	for k, v := range got {
		if !contains(v, `"v":"`+want[k]+`"`) {
			t.Errorf("%s = %s, want v=%s", k, v, want[k])
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func keysOf(m map[string]string) []string { return sortedKeys(m) }

// dbRowsText returns key → v of the kv table.
func (e *env) dbRowsText(view, _ string) map[string]string {
	e.t.Helper()
	rows, err := e.db.Query(context.Background(), "SELECT k, v FROM kv")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k int
		var v string
		if err := rows.Scan(&k, &v); err != nil {
			e.t.Fatal(err)
		}
		out[fmt.Sprintf("%s|%d", view, k)] = v
	}
	return out
}
