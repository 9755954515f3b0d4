package distributor

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// lastPosition is the last position record of recs.
func lastPosition(t *testing.T, recs []rec) *record.Position {
	t.Helper()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].meta.Kind == record.KindPosition {
			p, err := record.ParsePosition(recs[i].value)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatal("no position record")
	return nil
}

// TestWALViewBehind: a view whose changes re-read it in full (its table is read inside a
// function) is re-read off the stream's path. While its re-read is held (a lock its
// function waits for), the other view of the stream keeps following the commits, and the
// position records name the held view as behind, at the position it reflects; changes
// that arrive meanwhile are re-read after; released, it catches up and is current again.
func TestWALViewBehind(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL);
CREATE TABLE counted (id int PRIMARY KEY);
INSERT INTO items VALUES (1, 'a'), (2, 'b');
INSERT INTO counted VALUES (1);
CREATE FUNCTION gated_count() RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4242);
	RETURN (SELECT count(*) FROM counted);
END $$;`)
	items := ViewConfig{Name: "items", SQL: "SELECT id, label FROM items", Key: []string{"id"}}
	slow := ViewConfig{Name: "slow", SQL: "SELECT 1 AS k, gated_count() AS n", Key: []string{"k"}, Tables: []string{"counted"}}
	cfg := e.walConfig(items, slow)
	cfg.Streams[0].RereadDebounce = 10e6 // 10ms
	r := start(t, cfg)
	r.waitReady(t)

	ctx := context.Background()
	gate, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close(ctx)
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	before := lastPosition(t, readAll(t, e.brokers, e.topic)).LSN
	e.exec("INSERT INTO counted VALUES (2)")
	e.exec("UPDATE items SET label = 'a2' WHERE id = 1")
	var pos string
	if err := e.db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	want, _ := capture.ParseLSN(pos)
	recs := waitFor(t, e, "the items view past the held one", func(recs []rec) bool {
		p := lastPosition(t, recs)
		at, _ := capture.ParseLSN(p.LSN)
		return at >= want && e.converged(recs, items)
	})
	p := lastPosition(t, recs)
	if p.Behind["slow"] == "" {
		t.Fatalf("position %+v does not name the held view as behind:\n%s", p, dump(recs))
	}
	held, _ := capture.ParseLSN(p.Behind["slow"])
	if b, _ := capture.ParseLSN(before); held < b || held >= want {
		t.Errorf("slow is behind at %s, want a position from before its change (at least %s, below %s)", p.Behind["slow"], before, pos)
	}
	// Its SQL would wait for the lock too: read what the stream holds of it instead.
	if got := rowsOf(recs, "slow"); len(got) != 1 || !strings.Contains(canon(t, got[string(record.EncodeKey("slow", "1"))]), `"n":1`) {
		t.Errorf("the held view moved while its re-read waits: %v", got)
	}
	e.exec("INSERT INTO counted VALUES (3)") // while held: re-read again after
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	e.waitConverged(t, "the held view", items, slow)
	recs = waitFor(t, e, "a position without views behind", func(recs []rec) bool {
		return len(lastPosition(t, recs).Behind) == 0 && e.converged(recs, items, slow)
	})
	if n := countEnds(recs, "items"); n != 1 {
		t.Errorf("items: %d epochs, want the start-up one only (mapped)", n)
	}
}
