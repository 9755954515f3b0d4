package distributor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/statecast/statecast/internal/pggate"
)

// earlyCounter is a slog handler that counts the WAL cycles that read rows while the rest
// of their transactions were still being received (the cycle log's early_reads).
type earlyCounter struct {
	slog.Handler
	cycles *atomic.Int64
}

func (h earlyCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h earlyCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "cycle" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "early_reads" && a.Value.Int64() > 0 {
				h.cycles.Add(1)
			}
			return true
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h earlyCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return earlyCounter{h.Handler.WithAttrs(as), h.cycles}
}

func (h earlyCounter) WithGroup(name string) slog.Handler {
	return earlyCounter{h.Handler.WithGroup(name), h.cycles}
}

// TestWALBacklogReadEarly: a backlog written while the distributor's replication stream
// was held — 5,800 source transactions of inserts, updates, WHERE crossings, a rename,
// re-parented markets, cascaded deletes, then price changes — is re-read while it is still being received
// (a cycle reads the rows of the transactions received so far), and the views converge to
// PostgreSQL's: rows read early and rows read at the end combine into the result of one
// read. A second backlog with a TRUNCATE in its middle converges too: the joined view is
// re-read in full, whatever was read for it early.
func TestWALBacklogReadEarly(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	gate, dsn, err := pggate.Start(cfg.Postgres.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gate.Close)
	cfg.Postgres.DSN = dsn
	var early atomic.Int64
	r := start(t, cfg, func(d *Distributor) { d.log = slog.New(earlyCounter{testLogger(t).Handler(), &early}) })
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)

	var b strings.Builder
	txn := func(format string, a ...any) { fmt.Fprintf(&b, "BEGIN; "+format+"; COMMIT;\n", a...) }
	for i := range 2000 {
		ev := 1000 + i
		txn("INSERT INTO events VALUES (%d, %d, 'event %d'); INSERT INTO markets VALUES (%d, %d, 'winner', %d), (%d, %d, 'total', %d)",
			ev, 1+i%2, ev, ev*10, ev, i, ev*10+1, ev, i+1)
	}
	for i := 0; i < 2000; i += 4 {
		txn("UPDATE events SET status = 'closed' WHERE id = %d", 1000+i) // leaves open_events
	}
	txn("UPDATE competitions SET name = 'LaLiga' WHERE id = 2") // every market of competition 2
	for i := 1; i < 2000; i += 10 {
		txn("UPDATE markets SET event_id = 10 WHERE id = %d", (1000+i)*10) // re-parented to competition 1
	}
	for i := 2; i < 2000; i += 20 {
		txn("DELETE FROM events WHERE id = %d", 1000+i) // cascades to its markets
	}
	for i := range 3000 { // the last ones touch event_markets alone: open_events is read early only
		txn("UPDATE markets SET price = price + 1 WHERE id = %d", (1001+2*(i%1000))*10+1)
	}
	gate.Hold()
	e.exec(b.String())
	gate.Release()
	recs := e.waitConverged(t, "the backlog", views...)
	checkGroups(t, recs)
	if early.Load() == 0 {
		t.Fatalf("no cycle read rows while receiving a backlog of %d transactions", strings.Count(b.String(), "BEGIN"))
	}

	b.Reset()
	for i := range 500 {
		txn("UPDATE markets SET price = price + 1 WHERE id = %d", (1000+i)*10+1)
	}
	txn("TRUNCATE markets")
	for i := range 500 {
		ev := 1000 + 4*i + 1
		txn("INSERT INTO markets VALUES (%d, %d, 'again', %d)", ev*100, ev, i)
	}
	gate.Hold()
	e.exec(b.String())
	gate.Release()
	checkGroups(t, e.waitConverged(t, "the backlog with a TRUNCATE", views...))
}
