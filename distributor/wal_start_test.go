package distributor

import (
	"context"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/record"
)

// epochsAfter counts, per view, the epoch-begin and epoch-end records after offset from.
func epochsAfter(recs []rec, from int64) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		if r.offset > from && (r.meta.Kind == record.KindEpochBegin || r.meta.Kind == record.KindEpochEnd) {
			out[r.meta.View]++
		}
	}
	return out
}

// endOffset is the offset of the last record of recs (-1 when none).
func endOffset(recs []rec) int64 {
	if len(recs) == 0 {
		return -1
	}
	return recs[len(recs)-1].offset
}

// writeDowntime changes every table of the sportsbook views: an insert, an update, a
// delete, and a change that the join view maps through a column that is not its key.
func (e *env) writeDowntime() {
	e.exec("INSERT INTO events VALUES (12, 1, 'Leeds-Fulham')")
	e.exec("INSERT INTO markets VALUES (120, 12, 'winner', 40)")
	e.exec("UPDATE markets SET price = 99 WHERE id = 100")
	e.exec("DELETE FROM markets WHERE id = 101")
	e.exec("UPDATE competitions SET name = 'EPL' WHERE id = 1")
	e.exec("UPDATE events SET status = 'closed' WHERE id = 11")
}

// TestWALRestartUnchanged: a restart with the same configuration and the slot in place
// reads no view in full and publishes no epoch; the writes made while the distributor was
// down (inserts, updates, deletes, a change mapped through a non-key column) reach the
// stream from the slot, nothing is published twice, and read-your-writes holds after it.
func TestWALRestartUnchanged(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	r.stop(t)

	e.writeDowntime()
	from := endOffset(readAll(t, e.brokers, e.topic))
	r = start(t, cfg)
	r.waitReady(t)
	recs := e.waitConverged(t, "the writes made while down", views...)
	if n := epochsAfter(recs, from); len(n) != 0 {
		t.Fatalf("epoch records after the restart %v (none wanted):\n%s", n, dump(recs))
	}
	checkGroups(t, recs)
	noDuplicates(t, recs)

	e.exec("UPDATE markets SET price = 7 WHERE id = 110")
	e.readYourWrite(t, "a write after the restart", e.insertLSN(), func(recs []rec) bool {
		return e.converged(recs, views...)
	})
	if n := epochsAfter(readAll(t, e.brokers, e.topic), from); len(n) != 0 {
		t.Fatalf("epoch records after the restart: %v", n)
	}
}

// TestWALRestartViewChanged: a restart where one view's SQL changed republishes that view
// as one reconcile epoch (only its changed rows and tombstones) and no epoch of the other;
// the topic equals PostgreSQL for both, the writes made while down included.
func TestWALRestartViewChanged(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	r.stop(t)

	e.writeDowntime()
	from := endOffset(readAll(t, e.brokers, e.topic))
	views[0].SQL = "SELECT id, competition_id, name FROM events WHERE status = 'open' AND competition_id = 1"
	r = start(t, e.walConfig(views...))
	r.waitReady(t)
	recs := e.waitConverged(t, "the changed view and the writes made while down", views...)
	if n := epochsAfter(recs, from); len(n) != 1 || n["open_events"] != 2 {
		t.Fatalf("epoch records after the restart %v, want the begin and end of open_events only:\n%s", n, dump(recs))
	}
	var mode string
	for _, rr := range recs {
		if rr.offset > from && rr.meta.Kind == record.KindEpochBegin {
			b, err := record.ParseEpochBegin(rr.value)
			if err != nil {
				t.Fatal(err)
			}
			mode = b.Mode
		}
	}
	if mode != record.ModeReconcile {
		t.Errorf("the changed view's epoch is a %q, want a reconcile", mode)
	}
	// Only what differs: event 20 left the view, event 12 joined it (the downtime's).
	tombs, rows := 0, 0
	for _, rr := range recs {
		if rr.offset > from && rr.meta.View == "open_events" && rr.meta.Kind == record.KindRow {
			if rr.value == nil {
				tombs++
			} else {
				rows++
			}
		}
	}
	if tombs != 2 || rows != 1 {
		t.Errorf("open_events' epoch published %d rows and %d tombstones, want 1 (event 12) and 2 (events 11 and 20):\n%s", rows, tombs, dump(recs))
	}
	checkGroups(t, recs)
	noDuplicates(t, recs)
}

// TestWALRestartBehind: a view that is behind the stream when the distributor stops (its
// background re-read held) is read in full at the next start: the change that made it
// behind was confirmed to the slot with the others' cycle and is not sent again. The view
// that was current is not.
func TestWALRestartBehind(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL);
CREATE TABLE counted (id int PRIMARY KEY);
INSERT INTO items VALUES (1, 'a'), (2, 'b');
INSERT INTO counted VALUES (1);
CREATE FUNCTION gated_count() RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4243);
	RETURN (SELECT count(*) FROM counted);
END $$;`)
	items := ViewConfig{Name: "items", SQL: "SELECT id, label FROM items", Key: []string{"id"}}
	slow := ViewConfig{Name: "slow", SQL: "SELECT 1 AS k, gated_count() AS n", Key: []string{"k"}, Tables: []string{"counted"}}
	cfg := e.walConfig(items, slow)
	cfg.Streams[0].RereadDebounce = 10e6 // 10ms
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", items, slow)

	ctx := context.Background()
	gate := e.connect()
	defer closeConn(gate)
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock(4243)"); err != nil {
		t.Fatal(err)
	}
	e.exec("INSERT INTO counted VALUES (2)")
	e.exec("UPDATE items SET label = 'a2' WHERE id = 1")
	waitFor(t, e, "slow behind, items current", func(recs []rec) bool {
		return lastPosition(t, recs).Behind["slow"] != "" && e.converged(recs, items)
	})
	r.stop(t)
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock(4243)"); err != nil {
		t.Fatal(err)
	}

	from := endOffset(readAll(t, e.brokers, e.topic))
	r = start(t, cfg)
	r.waitReady(t)
	recs := waitFor(t, e, "slow read in full at the start", func(recs []rec) bool {
		return e.converged(recs, items, slow) && len(lastPosition(t, recs).Behind) == 0
	})
	if n := epochsAfter(recs, from); len(n) != 1 || n["slow"] != 2 {
		t.Fatalf("epoch records after the restart %v, want one epoch of slow only:\n%s", n, dump(recs))
	}
}

// TestWALRestartSlotAhead: when the slot's confirmed position is past the topic's last
// position (here the slot was advanced by hand while the distributor was down; a topic
// restored from an older backup does the same), the commits in between are not sent
// again: every view is read in full at the start, and the writes of that gap arrive.
func TestWALRestartSlotAhead(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	r.stop(t)

	e.writeDowntime()
	e.exec("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", slotName(e.topic))
	from := endOffset(readAll(t, e.brokers, e.topic))
	r = start(t, cfg)
	r.waitReady(t)
	recs := e.waitConverged(t, "the writes the slot skipped", views...)
	if n := epochsAfter(recs, from); n["open_events"] != 2 || n["event_markets"] != 2 {
		t.Fatalf("epoch records after the restart %v, want one epoch of each view", n)
	}
	noDuplicates(t, recs)
}

// TestWALRestartResent: the slot is set back to a position before the stream's (a copy
// of the slot taken earlier, as after a kill between a cycle's Kafka commit and the
// slot's confirmation): at the restart the slot sends again commits the stream already
// holds; their re-reads publish nothing twice and no epoch, and the later ones arrive.
func TestWALRestartResent(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	slot := slotName(e.topic)
	backup := slot + "_b"
	dropSlotLater(t, backup)
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	e.exec("SELECT pg_copy_logical_replication_slot($1, $2)", slot, backup)
	e.exec("INSERT INTO events VALUES (13, 2, 'Real-Atletico')")
	e.exec("UPDATE markets SET price = 55 WHERE id = 200")
	e.exec("UPDATE competitions SET name = 'Liga' WHERE id = 2")
	e.readYourWrite(t, "the writes the slot will send again", e.insertLSN(), func(recs []rec) bool { return e.converged(recs, views...) })
	r.stop(t)

	// The server's walsender of the stopped distributor may still hold the slot for a
	// moment after the connection closed: it must be gone before the slot can be dropped.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var active bool
		if err := e.db.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if !active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s still active 30 s after the distributor stopped", slot)
		}
	}
	e.exec("SELECT pg_drop_replication_slot($1)", slot)
	e.exec("SELECT pg_copy_logical_replication_slot($1, $2)", backup, slot)
	e.exec("SELECT pg_drop_replication_slot($1)", backup)
	e.exec("DELETE FROM markets WHERE id = 110")
	from := endOffset(readAll(t, e.brokers, e.topic))
	r = start(t, cfg)
	r.waitReady(t)
	recs := e.waitConverged(t, "the write after the copy", views...)
	if n := epochsAfter(recs, from); len(n) != 0 {
		t.Fatalf("epoch records after the restart %v (none wanted):\n%s", n, dump(recs))
	}
	checkGroups(t, recs)
	noDuplicates(t, recs)
}
