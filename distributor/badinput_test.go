package distributor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/record"
)

// TestBadView: a view whose SQL or data is bad is stopped at start-up with an error
// naming it (and its column or key) in its status, publishes nothing, and is listed as
// stale by the position records; the good view beside it is published, and Run goes on.
func TestBadView(t *testing.T) {
	cases := []struct {
		name   string
		view   ViewConfig
		maxMsg int
		want   string // in the error text
	}{
		{name: "sql does not parse", view: ViewConfig{SQL: "SELEC id FROM items", Key: []string{"id"}}, want: "syntax error"},
		{name: "sql fails while running", view: ViewConfig{SQL: "SELECT id, 10 / (id - 2) AS x FROM items", Key: []string{"id"}}, want: "division by zero"},
		{name: "missing table", view: ViewConfig{SQL: "SELECT id FROM nope", Key: []string{"id"}}, want: "nope"},
		{name: "missing key column", view: ViewConfig{SQL: "SELECT id, name FROM items", Key: []string{"id", "sku"}}, want: `"sku"`},
		{name: "null key", view: ViewConfig{SQL: "SELECT id, CASE WHEN id = 2 THEN NULL ELSE name END AS k FROM items", Key: []string{"id", "k"}}, want: `key "2|NULL"`},
		{name: "duplicate key", view: ViewConfig{SQL: "SELECT 7 AS id, name FROM items", Key: []string{"id"}}, want: `key "bad|7": duplicate key`},
		{name: "unmapped type", view: ViewConfig{SQL: "SELECT id, point(id, 1) AS p FROM items", Key: []string{"id"}}, want: `column "p"`},
		{name: "oversized row", view: ViewConfig{SQL: "SELECT id, repeat('x', id * 3000) AS big FROM items", Key: []string{"id"}}, maxMsg: 5000, want: "exceeds the broker's message limit"},
		{name: "missing incremental column", view: ViewConfig{SQL: "SELECT id FROM items", Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "updated_at"}}, want: `column "updated_at"`},
		{name: "incremental of wrong type", view: ViewConfig{SQL: "SELECT id, name FROM items", Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "name"}}, want: `column "name"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.createItems()
			tc.view.Name = "bad"
			cfg := e.config(ViewConfig{Name: "good", SQL: itemsSQL, Key: []string{"id"}}, tc.view)
			cfg.Kafka.MaxMessageBytes = tc.maxMsg
			r := start(t, cfg)
			r.waitReady(t)
			var bad ViewStatus
			for _, v := range r.d.Status()[0].Views {
				if v.Name == "bad" {
					bad = v
				}
			}
			if !strings.Contains(bad.Failed, tc.want) || !strings.Contains(bad.Failed, `view "bad"`) {
				t.Fatalf("status of the bad view %+v; want its error naming the view and containing %q", bad, tc.want)
			}
			recs := readAll(t, e.brokers, e.topic)
			if len(rowsOf(recs, "good")) != 3 || len(kinds(recs, "bad")) != 0 {
				t.Fatalf("want the good view published and nothing of the bad one:\n%s", dump(recs))
			}
			p, err := record.ParsePosition(recs[len(recs)-1].value)
			if err != nil || len(p.Stale) != 1 || p.Stale[0] != "bad" {
				t.Fatalf("last record %v: want a position record naming the stale view (%v)", recs[len(recs)-1], err)
			}
			select {
			case <-r.finished:
				t.Fatalf("Run ended: %v", r.err)
			default:
			}
		})
	}
}

// TestBadRowFixed: a bad row stops its view only; the other view keeps publishing, and
// once the row is corrected the view resumes without a restart.
func TestBadRowFixed(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	bad := ViewConfig{Name: "ratios", SQL: "SELECT id, 100 / length(name) AS r FROM items", Key: []string{"id"},
		ViewSettings: ViewSettings{RefreshCron: RefreshNever}}
	r := start(t, e.config(itemsView(), bad))
	r.waitReady(t)
	e.exec(`UPDATE items SET name = '' WHERE id = 1`) // division by zero in ratios
	r.d.Reconcile(context.Background(), "ratios")     // the failure is reported to the caller too
	waitCond(t, "ratios stopped", func() bool { return strings.Contains(r.d.Status()[0].Views[1].Failed, "division by zero") })
	e.exec(`INSERT INTO items (id, name) VALUES (50, 'still published')`)
	waitFor(t, e, "items keeps publishing", func(recs []rec) bool { return rowsOf(recs, "items")["items|50"] != "" })
	e.exec(`UPDATE items SET name = 'fixed' WHERE id = 1`)
	waitCond(t, "ratios resumed", func() bool { return r.d.Status()[0].Views[1].Failed == "" })
	recs := waitFor(t, e, "ratios of the fixed row", func(recs []rec) bool { return rowsOf(recs, "ratios")["ratios|1"] == `{"id":1,"r":20}` })
	p, err := record.ParsePosition(recs[len(recs)-1].value)
	if err != nil || len(p.Stale) != 0 {
		t.Fatalf("position after the fix %+v %v, want no stale view", p, err)
	}
}

// TestBadTopic: an existing topic with several partitions or without compaction is refused.
func TestBadTopic(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int32
		policy     string
		want       string
	}{
		{"two partitions", 2, "compact", "2 partitions"},
		{"not compacted", 1, "delete", "cleanup.policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.createItems()
			createTopic(t, e, tc.partitions, tc.policy)
			d, err := New(e.config(itemsView()), WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = d.Run(ctx)
			if !errors.Is(err, ErrTopic) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want ErrTopic with %q", err, tc.want)
			}
		})
	}
}
