package distributor

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/record"
)

// Polling mode's defaults, against the real PostgreSQL and Kafka: overlap and refresh_cron
// are safe when left unset, and NULL incremental values are counted.

// watermarks lists the watermarks of view's poll records, in topic order.
func watermarks(t *testing.T, recs []rec, view string) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		if r.meta.View == view && r.meta.Kind == record.KindPoll {
			p, err := record.ParsePoll(r.value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Watermark)
		}
	}
	return out
}

// polls counts view's poll records.
func polls(recs []rec, view string) int {
	n := 0
	for _, r := range recs {
		if r.meta.View == view && r.meta.Kind == record.KindPoll {
			n++
		}
	}
	return n
}

// wView is a polled view over table w (id, name, ver) with every setting left to its default
// but a short poll interval.
func wView() ViewConfig {
	return ViewConfig{Name: "w", SQL: "SELECT id, name, ver FROM w", Key: []string{"id"},
		ViewSettings: ViewSettings{Incremental: "ver", PollInterval: 50 * time.Millisecond}}
}

// hasLine reports whether a message starts with prefix and contains every one of parts.
func (l *logTap) hasLine(prefix string, parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, m := range l.msgs {
		if !strings.HasPrefix(m, prefix) {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		return true
	}
	return false
}

func (l *logTap) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// TestDefaultOverlapLateCommit: with overlap left unset, a transaction that commits after
// a later one was polled is still polled, for a time column and for a version column
// (sequence), and no row is published twice.
func TestDefaultOverlapLateCommit(t *testing.T) {
	for _, tc := range []struct{ typ, def string }{
		{"timestamptz", "clock_timestamp()"},
		{"bigint", "nextval('ver')"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			e := newEnv(t)
			e.exec(`CREATE SEQUENCE ver`)
			e.exec(`CREATE TABLE w (id int PRIMARY KEY, name text NOT NULL, ver ` + tc.typ + ` NOT NULL DEFAULT ` + tc.def + `)`)
			e.exec(`INSERT INTO w (id, name) VALUES (1, 'seed')`)
			r := start(t, e.config(wView()))
			r.waitReady(t)
			ctx := context.Background()
			late, err := e.db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer late.Rollback(ctx)
			if _, err := late.Exec(ctx, `INSERT INTO w (id, name) VALUES (10, 'late')`); err != nil {
				t.Fatal(err)
			}
			if _, err := e.connect().Exec(ctx, `INSERT INTO w (id, name) VALUES (11, 'early')`); err != nil {
				t.Fatal(err)
			}
			recs := waitFor(t, e, "row 11", func(recs []rec) bool { return rowsOf(recs, "w")["w|11"] != "" })
			n := polls(recs, "w")
			waitFor(t, e, "a poll after row 11", func(recs []rec) bool { return polls(recs, "w") > n })
			if err := late.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			recs = waitFor(t, e, "late row 10", func(recs []rec) bool { return rowsOf(recs, "w")["w|10"] != "" })
			counts := map[string]int{}
			for _, k := range kinds(recs, "w") {
				counts[k]++
			}
			if counts["row:w|1"] != 1 || counts["row:w|10"] != 1 || counts["row:w|11"] != 1 {
				t.Errorf("publication counts %v (the overlap must not republish unchanged rows)", counts)
			}
		})
	}
}

// TestScheduledReconcileDelete: a polled view's scheduled reconcile publishes a delete and
// a row that left the WHERE without any request (the default schedule is
// DefaultRefreshCron, TestRefreshCronDefault; a short one here), and a view whose
// refresh_cron is RefreshNever runs no scheduled reconcile.
func TestScheduledReconcileDelete(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := itemsView()
	v.SQL = itemsSQL + " WHERE name <> 'hidden'"
	v.RefreshCron = "@every 1s"
	never := itemsView()
	never.Name = "never"
	never.RefreshCron = RefreshNever
	r := start(t, e.config(v, never))
	r.waitReady(t)
	e.exec(`DELETE FROM items WHERE id = 2`)
	e.exec(`UPDATE items SET name = 'hidden', updated_at = clock_timestamp() WHERE id = 3`)
	recs := waitFor(t, e, "the tombstones", func(recs []rec) bool {
		rows := rowsOf(recs, "items")
		return rows["items|2"] == "" && rows["items|3"] == ""
	})
	k := kinds(recs, "items")
	if !slices.Contains(k, "tomb:items|2") || !slices.Contains(k, "tomb:items|3") {
		t.Errorf("records %v", k)
	}
	if n := countEnds(recs, "never"); n != 1 {
		t.Errorf("view with refresh_cron never: %d epochs, want only the start-up one", n)
	}
}

// TestIncrementalNulls: rows whose incremental value is NULL are counted at each epoch
// (metric, log); a poll does not publish their changes, a reconcile does.
func TestIncrementalNulls(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE w (id int PRIMARY KEY, name text NOT NULL, ver timestamptz)`)
	e.exec(`INSERT INTO w VALUES (1, 'a', clock_timestamp()), (2, 'b', NULL), (3, 'c', NULL)`)
	tap := &logTap{}
	r, reg := startReg(t, e.config(wView()), slog.New(tap))
	r.waitReady(t)
	nulls := func() float64 {
		return metricSum(t, reg, "statecast_distributor_incremental_nulls", map[string]string{"stream": e.topic, "view": "w"})
	}
	const logged = "rows with a NULL incremental value"
	if nulls() != 2 || !tap.hasLine(logged, "view=w", "rows=2") {
		t.Fatalf("nulls = %v; log:\n%s", nulls(), tap.text())
	}
	e.exec(`UPDATE w SET name = 'changed' WHERE id = 2`)
	e.exec(`UPDATE w SET name = 'changed', ver = NULL WHERE id = 1`)
	recs := readAll(t, e.brokers, e.topic)
	n := polls(recs, "w")
	recs = waitFor(t, e, "more polls", func(recs []rec) bool { return polls(recs, "w") >= n+5 })
	if rows := rowsOf(recs, "w"); strings.Contains(rows["w|1"]+rows["w|2"], "changed") {
		t.Fatalf("a poll published a row with a NULL incremental value:\n%s", dump(recs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.d.Reconcile(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(readAll(t, e.brokers, e.topic), "w")
	if !strings.Contains(rows["w|1"], "changed") || !strings.Contains(rows["w|2"], "changed") {
		t.Errorf("the reconcile did not publish the changes: %v", rows)
	}
	if nulls() != 3 || !tap.hasLine(logged, "view=w", "rows=3") {
		t.Errorf("nulls = %v after the reconcile, want 3 (logged); log:\n%s", nulls(), tap.text())
	}
}
