package distributor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBadView: every bad view refuses start-up with an error naming the view (and column or
// key), and NOTHING is published in the stream — not even for the good view beside it.
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
			d, err := New(cfg, WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = d.Run(ctx)
			if !isViewErr(err, "bad") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v; want a *ViewError for view \"bad\" containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), `view "bad"`) {
				t.Errorf("error does not name the view: %v", err)
			}
			if werr := d.WaitReady(ctx); !errors.Is(werr, ErrStopped) || !errors.Is(werr, ErrView) {
				t.Errorf("WaitReady after a failed Run = %v, want ErrStopped wrapping the view error", werr)
			}
			if recs := readAll(t, e.brokers, e.topic); len(recs) != 0 {
				t.Fatalf("published despite the error:\n%s", dump(recs))
			}
		})
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
