package distributor

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// slotPID is the process of the slot's replication connection (0: none): the same one
// before and after a change means the capture session went on.
func (e *env) slotPID(t *testing.T) int {
	t.Helper()
	var pid *int
	if err := e.db.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slotName(e.topic)).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == nil {
		return 0
	}
	return *pid
}

// viewStatus is the status of the named view of the first stream.
func (r *running) viewStatus(t *testing.T, name string) ViewStatus {
	t.Helper()
	for _, v := range r.d.Status()[0].Views {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no view %q in the status", name)
	return ViewStatus{}
}

// waitStopped waits until view is stopped with an error that names it and column, and
// the position records list it as stale.
func (r *running) waitStopped(t *testing.T, e *env, view, column string) {
	t.Helper()
	waitCond(t, view+" stopped", func() bool { return r.viewStatus(t, view).Failed != "" })
	msg := r.viewStatus(t, view).Failed
	if !strings.Contains(msg, `"`+view+`"`) || !strings.Contains(msg, column) || !strings.Contains(msg, "does not exist") {
		t.Fatalf("%s stopped with %q: want the view and the column %q named", view, msg, column)
	}
	waitFor(t, e, view+" stale in the position records", func(recs []rec) bool {
		return slices.Contains(lastPosition(t, recs).Stale, view)
	})
}

// TestWALAddColumn: a column added to a table that views read goes on without a re-read
// or a new capture session: the views that do not select it publish its table's changes
// from the same session, with no epoch. A `SELECT *` view gains the column: that view
// alone gets one new epoch (the session is analyzed again), the others none.
func TestWALAddColumn(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	comps := ViewConfig{Name: "comps", SQL: "SELECT * FROM competitions", Key: []string{"id"}}
	views := append(walViews(), comps)
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	pid := e.slotPID(t)

	e.exec("ALTER TABLE markets ADD COLUMN note text")
	e.exec("UPDATE markets SET price = 17, note = 'n' WHERE id = 100")
	e.exec("INSERT INTO markets (id, event_id, name, price, note) VALUES (102, 10, 'handicap', 3, 'h')")
	e.exec("ALTER TABLE events ADD COLUMN venue text")
	e.exec("UPDATE events SET name = 'Arsenal v Chelsea', venue = 'Emirates' WHERE id = 10")
	recs := e.waitConverged(t, "the changes after ADD COLUMN", views...)
	for _, v := range views {
		if n := countEnds(recs, v.Name); n != 1 {
			t.Errorf("%s: %d epochs after ADD COLUMN, want the first one only:\n%s", v.Name, n, dump(recs))
		}
	}
	if now := e.slotPID(t); now != pid {
		t.Errorf("the capture session changed (replication process %d, then %d): ADD COLUMN must not end it", pid, now)
	}

	e.exec("ALTER TABLE competitions ADD COLUMN region text NOT NULL DEFAULT 'eu'")
	e.exec("UPDATE competitions SET name = 'EPL' WHERE id = 1")
	recs = waitFor(t, e, "comps with the new column", func(recs []rec) bool {
		return e.converged(recs, views...) && strings.Contains(rowsOf(recs, "comps")["comps|2"], "region")
	})
	for _, v := range views {
		want := 1
		if v.Name == "comps" {
			want = 2
		}
		if n := countEnds(recs, v.Name); n != want {
			t.Errorf("%s: %d epochs after the `SELECT *` table gained a column, want %d:\n%s", v.Name, n, want, dump(recs))
		}
	}
	checkGroups(t, recs)
	noDuplicates(t, recs)
}

// TestWALDropColumn: dropping a column a view selects stops that view with an error that
// names it and the column (status, position records' stale), while the other view of the
// stream keeps publishing; a new capture session meanwhile leaves the stopped view out
// instead of refusing the stream; once the column is back, the view resumes and converges.
func TestWALDropColumn(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews() // open_events; event_markets selects m.price
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)

	e.exec("ALTER TABLE markets DROP COLUMN price")
	e.exec("UPDATE markets SET name = 'winner2' WHERE id = 100")
	r.waitStopped(t, e, "event_markets", "price")
	e.exec("INSERT INTO events VALUES (12, 1, 'Leeds-Fulham')")
	e.waitConverged(t, "open_events while event_markets is stopped", views[0])

	// A new session (the replication connection ended) while the column is gone.
	e.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", slotName(e.topic))
	e.exec("INSERT INTO events VALUES (14, 2, 'Valencia-Betis')")
	e.waitConverged(t, "open_events after a new session", views[0])
	if got := r.viewStatus(t, "event_markets").Failed; !strings.Contains(got, "price") {
		t.Fatalf("event_markets after the new session: %q, want it stopped on the column", got)
	}

	e.exec("ALTER TABLE markets ADD COLUMN price int")
	e.exec("UPDATE markets SET price = 5 WHERE id = 100")
	recs := e.waitConverged(t, "event_markets resumed", views...)
	waitCond(t, "event_markets resumed", func() bool { return r.viewStatus(t, "event_markets").Failed == "" })
	if n := countEnds(recs, "open_events"); n != 1 {
		t.Errorf("open_events: %d epochs, want the first one only", n)
	}
	checkGroups(t, recs)
}

// TestWALRenameColumn: renaming a column that a view's mapping reads from the changes (a
// captured column: the grouping column of an aggregate) stops that view, naming it and
// the column; a view of the same table that does not read the column goes on with its
// changes mapped (no epoch), and so does a view of another table; renamed back, the view
// resumes.
func TestWALRenameColumn(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, category text NOT NULL, label text NOT NULL);
CREATE TABLE other (id int PRIMARY KEY, amount int NOT NULL);
INSERT INTO items VALUES (1, 'a', 'one'), (2, 'a', 'two'), (3, 'b', 'three');
INSERT INTO other VALUES (1, 10);`)
	perCategory := ViewConfig{Name: "per_category", SQL: "SELECT category, count(*) AS n FROM items GROUP BY category", Key: []string{"category"}}
	labels := ViewConfig{Name: "labels", SQL: "SELECT id, label FROM items", Key: []string{"id"}}
	others := ViewConfig{Name: "others", SQL: "SELECT id, amount FROM other", Key: []string{"id"}}
	views := []ViewConfig{perCategory, labels, others}
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)

	e.exec("ALTER TABLE items RENAME COLUMN category TO kind")
	e.exec("INSERT INTO items VALUES (4, 'b', 'four')")
	e.exec("UPDATE items SET label = 'uno' WHERE id = 1")
	r.waitStopped(t, e, "per_category", "category")
	e.exec("UPDATE other SET amount = 11 WHERE id = 1")
	recs := e.waitConverged(t, "labels and others while per_category is stopped", labels, others)
	for _, v := range []string{"labels", "others"} {
		if n := countEnds(recs, v); n != 1 {
			t.Errorf("%s: %d epochs, want the first one only (its changes mapped):\n%s", v, n, dump(recs))
		}
	}

	e.exec("ALTER TABLE items RENAME COLUMN kind TO category")
	e.exec("INSERT INTO items VALUES (5, 'c', 'five')")
	recs = e.waitConverged(t, "per_category resumed", views...)
	waitCond(t, "per_category resumed", func() bool { return r.viewStatus(t, "per_category").Failed == "" })
	checkGroups(t, recs)
}

// TestWALReplicaIdentityChange: a table's replica identity changed under the stream (to
// a unique index of other columns): its old key tuples hold other columns than the
// analyzed identity. The session ends and the views are analyzed again; the changes
// before and after arrive, deletes included.
func TestWALReplicaIdentityChange(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE codes (id int PRIMARY KEY, code text NOT NULL UNIQUE, amount int NOT NULL);
INSERT INTO codes VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3);`)
	view := ViewConfig{Name: "codes", SQL: "SELECT id, code, amount FROM codes", Key: []string{"id"}}
	cfg := e.walConfig(view)
	cfg.Streams[0].ReplicaIdentity = ReplicaIdentityKeep
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", view)

	e.exec("UPDATE codes SET amount = 10 WHERE id = 1")
	e.exec("ALTER TABLE codes REPLICA IDENTITY USING INDEX codes_code_key")
	e.exec("DELETE FROM codes WHERE id = 2")
	e.exec("UPDATE codes SET amount = 30 WHERE id = 3")
	e.waitConverged(t, "the changes across the identity change", view)
	e.exec("DELETE FROM codes WHERE id = 3")
	recs := e.waitConverged(t, "a delete under the new identity", view)
	checkGroups(t, recs)
}
