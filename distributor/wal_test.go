package distributor

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/record"
)

const sportsbookSchema = `
CREATE TABLE competitions (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE events (id bigint PRIMARY KEY, competition_id int NOT NULL REFERENCES competitions ON DELETE CASCADE, name text NOT NULL, status text NOT NULL DEFAULT 'open');
CREATE TABLE markets (id bigint PRIMARY KEY, event_id bigint NOT NULL REFERENCES events ON DELETE CASCADE, name text NOT NULL, price int);
INSERT INTO competitions VALUES (1, 'Premier League'), (2, 'La Liga');
INSERT INTO events VALUES (10, 1, 'Arsenal-Chelsea'), (11, 1, 'Spurs-Everton'), (20, 2, 'Barcelona-Sevilla');
INSERT INTO markets VALUES (100, 10, 'winner', 15), (101, 10, 'total', 21), (110, 11, 'winner', 30), (200, 20, 'winner', 19);
`

// Views of the WAL tests: a single-table view with a WHERE, and a three-table join that
// selects every table's key (mapped by them).
var (
	openEventsSQL   = "SELECT id, competition_id, name FROM events WHERE status = 'open'"
	eventMarketsSQL = `SELECT m.id, m.name, m.price, e.id AS event_id, e.name AS event, c.id AS competition_id, c.name AS competition
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`
)

func walViews() []ViewConfig {
	return []ViewConfig{
		{Name: "open_events", SQL: openEventsSQL, Key: []string{"id"}},
		{Name: "event_markets", SQL: eventMarketsSQL, Key: []string{"id"}},
	}
}

// walConfig returns a one-stream wal config; the slot is dropped when the test ends
// (after the distributor stopped: cleanups run last-registered first).
func (e *env) walConfig(views ...ViewConfig) Config {
	c := e.config(views...)
	c.Streams[0].Capture = CaptureWAL
	c.Streams[0].PositionInterval = 20 * time.Millisecond
	dropSlotLater(e.t, slotName(e.topic))
	return c
}

func dropSlotLater(t testing.TB, slot string) {
	admin := testenv.PostgresDSN(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		for ctx.Err() == nil {
			if err := capture.DropSlot(ctx, c, slot); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// positions returns the LSNs of the position records, in order.
func positions(t *testing.T, recs []rec) []capture.LSN {
	t.Helper()
	var out []capture.LSN
	for _, r := range recs {
		if r.meta.Kind != record.KindPosition {
			continue
		}
		p, err := record.ParsePosition(r.value)
		if err != nil {
			t.Fatal(err)
		}
		l, err := capture.ParseLSN(p.LSN)
		if err != nil {
			t.Fatalf("position %q: %v", p.LSN, err)
		}
		out = append(out, l)
	}
	return out
}

// checkGroups checks the stream's source transactions: every record but position records
// carries sc-txn, and the positions never go back.
func checkGroups(t *testing.T, recs []rec) {
	t.Helper()
	for _, r := range recs {
		if r.meta.Kind != record.KindPosition && !r.meta.Txn {
			t.Fatalf("record without sc-txn: %s", r)
		}
	}
	ps := positions(t, recs)
	for i := 1; i < len(ps); i++ {
		if ps[i] < ps[i-1] {
			t.Fatalf("position went back: %s after %s", ps[i], ps[i-1])
		}
	}
}

// converged reports whether every view's rows in the topic equal its SQL's.
func (e *env) converged(recs []rec, views ...ViewConfig) bool {
	for _, v := range views {
		if !maps.Equal(canonMap(e.t, rowsOf(recs, v.Name)), canonMap(e.t, e.dbRows(v.Name, v.SQL, v.Key...))) {
			return false
		}
	}
	return true
}

func (e *env) waitConverged(t *testing.T, what string, views ...ViewConfig) []rec {
	t.Helper()
	return waitFor(t, e, what, func(recs []rec) bool { return e.converged(recs, views...) })
}

// TestWALCapture: inserts, updates and deletes of single-table and join views reach the
// stream from the WAL, without any poll or reconcile, as source transactions that end
// with position records; a row leaving the WHERE is tombstoned; a renamed competition
// republishes the rows of its markets; a cascaded delete tombstones them.
func TestWALCapture(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	recs := e.waitConverged(t, "the first snapshot", views...)
	checkGroups(t, recs)

	e.exec("INSERT INTO events VALUES (12, 1, 'Leeds-Fulham')")
	e.exec("UPDATE markets SET price = 16 WHERE id = 100")
	e.exec("DELETE FROM markets WHERE id = 101")
	e.waitConverged(t, "insert, update, delete", views...)

	e.exec("UPDATE events SET status = 'closed' WHERE id = 11") // leaves open_events
	e.exec("UPDATE competitions SET name = 'EPL' WHERE id = 1") // every market of competition 1
	recs = e.waitConverged(t, "WHERE crossing and a renamed competition", views...)
	if !strings.Contains(rowsOf(recs, "event_markets")[string(record.EncodeKey("event_markets", "110"))], `"EPL"`) {
		t.Fatalf("market 110 not renamed:\n%s", dump(recs))
	}

	e.exec("UPDATE markets SET event_id = 20 WHERE id = 110") // re-parented to another competition
	e.exec("DELETE FROM competitions WHERE id = 1")           // cascades to events and markets
	recs = e.waitConverged(t, "a re-parented market and a cascaded delete", views...)
	checkGroups(t, recs)
	for _, rr := range recs {
		if rr.meta.Kind == record.KindEpochBegin && rr.offset > recs[0].offset+20 {
			t.Fatalf("an epoch after the first snapshot (the changes must be mapped, not re-read):\n%s", dump(recs))
		}
	}
}
