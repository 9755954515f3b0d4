package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
)

// The capture-* benchmarks measure the WAL capture path end to end: writers commit to
// PostgreSQL, a distributor (capture: wal) publishes into Kafka, a player serves the topic
// and a cacheclient applies it; all three run in this process, as in the other
// benchmarks of cachebench. Their floor is pg_recvlogical on a slot of its own.

// captureTable is the table the capture benchmarks' writers change.
const captureTable = "capture_rows"

// captureView publishes captureTable as it is.
var captureView = distributor.ViewConfig{Name: "rows", SQL: "SELECT id, v, w, pad FROM " + captureTable, Key: []string{"id"}}

// captureOpts are the flags every capture benchmark has.
type captureOpts struct {
	recvlogical *string
	timeout     *time.Duration
	log         *bool
	debug       *bool
}

func captureFlags(args *bench.Args) captureOpts {
	return captureOpts{
		recvlogical: args.String("pg-recvlogical", "", "pg_recvlogical to run (default "+bench.DefaultRecvLogical+" when present, else the one on PATH)"),
		timeout:     args.Duration("timeout", 2*time.Minute, "how long to wait for the last write to be visible"),
		log:         args.Bool("log", false, "write the distributor's log to stderr"),
		debug:       args.Bool("log-debug", false, "with -log: at debug level (each WAL cycle's timings)"),
	}
}

// distOpts are the distributor's options (its log with -log).
func (o captureOpts) distOpts() []distributor.Option {
	if !*o.log {
		return nil
	}
	level := slog.LevelInfo
	if *o.debug {
		level = slog.LevelDebug
	}
	return []distributor.Option{distributor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))}
}

// capturePath describes where the pipeline runs, for the header.
func capturePath() string {
	return fmt.Sprintf("PostgreSQL -> distributor (capture: wal) -> Kafka -> player -> cacheclient; distributor, player and cacheclient in this process (GOMAXPROCS=%d)",
		runtime.GOMAXPROCS(0))
}

// goalAtMost prints a goal line "goal <what> <= limit: got  MET", with by how much a
// missed goal was missed.
func goalAtMost(w io.Writer, what string, got, limit time.Duration) {
	goalAtMostOf(w, what, bench.MS(limit)+" ms", got, limit)
}

// goalAtMostOf is goalAtMost with the limit described (a limit computed in the run).
func goalAtMostOf(w io.Writer, what, limitText string, got, limit time.Duration) {
	by := ""
	if got > limit {
		by = fmt.Sprintf(" (over by %s ms)", bench.MS(got-limit))
	}
	fmt.Fprintf(w, "goal %s <= %s: %s ms  %s%s\n", what, limitText, bench.MS(got), bench.Verdict(got <= limit), by)
}

// goalAtLeast prints a goal line for a rate or a ratio: "goal <what> >= limit: got  MET".
func goalAtLeast(w io.Writer, what string, got, limit float64, unit string) {
	by := ""
	if got < limit {
		by = fmt.Sprintf(" (short by %.0f%s)", limit-got, unit)
	}
	fmt.Fprintf(w, "goal %s >= %.0f%s: %.0f%s  %s%s\n", what, limit, unit, got, unit, bench.Verdict(got >= limit), by)
}

// commitSpan is one span per transaction from just before its COMMIT was sent to at(t),
// leaving out the transactions for which ok(t) is false.
func commitSpan(txns []*bench.Txn, at func(*bench.Txn) (time.Time, bool)) []time.Duration {
	var out []time.Duration
	for _, t := range txns {
		if ts, ok := at(t); ok {
			out = append(out, ts.Sub(t.Sent))
		}
	}
	return out
}

func visibleAt(t *bench.Txn) (time.Time, bool) { return t.Visible, !t.Visible.IsZero() }

// byOp returns the transactions of op.
func byOp(txns []*bench.Txn, op bench.Op) []*bench.Txn {
	var out []*bench.Txn
	for _, t := range txns {
		if t.Op == op {
			out = append(out, t)
		}
	}
	return out
}

// xids are the transactions' ids.
func xids(txns []*bench.Txn) []uint32 {
	out := make([]uint32, len(txns))
	for i, t := range txns {
		out[i] = t.Xid
	}
	return out
}

// span is the time from the first transaction's COMMIT to the last one's end as given by
// end.
func span(txns []*bench.Txn, end func(*bench.Txn) time.Time) time.Duration {
	if len(txns) == 0 {
		return 0
	}
	first, last := txns[0].Sent, end(txns[0])
	for _, t := range txns {
		if t.Sent.Before(first) {
			first = t.Sent
		}
		if e := end(t); e.After(last) {
			last = e
		}
	}
	return last.Sub(first)
}

// floorPub is the publication of the floor's slots.
const floorPub = "bench_floor"

// floor is pg_recvlogical on a pgoutput slot of its own, over the tables of a publication
// (captureTable's: floorPub).
type floor struct {
	env  *bench.DistEnv
	pub  string
	slot string
	rl   *bench.RecvLogical
}

// newFloor creates the slot (and the publication, once): the floor decodes every commit
// after this moment.
func newFloor(ctx context.Context, env *bench.DistEnv) (*floor, error) {
	return newFloorOf(ctx, env, floorPub, func() error { return bench.Publication(ctx, env.Conn, floorPub, captureTable) })
}

// newFloorOf is newFloor over the publication pub, created by create when missing.
func newFloorOf(ctx context.Context, env *bench.DistEnv, pub string, create func() error) (*floor, error) {
	var exists bool
	if err := env.Conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1)", pub).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		if err := create(); err != nil {
			return nil, err
		}
	}
	f := &floor{env: env, pub: pub, slot: bench.UniqueName("bench_floor")}
	if _, err := bench.CreateSlot(ctx, env.Conn, f.slot, "pgoutput"); err != nil {
		return nil, err
	}
	return f, nil
}

// start starts pg_recvlogical on the slot.
func (f *floor) start(o captureOpts) (err error) {
	f.rl, err = bench.StartRecvLogical(bench.RecvLogicalConfig{Bin: *o.recvlogical, DSN: f.env.DSN, Slot: f.slot, Publication: f.pub})
	return err
}

// close stops pg_recvlogical and drops the slot.
func (f *floor) close() error {
	var err error
	if f.rl != nil {
		err = f.rl.Stop()
		f.rl = nil
	}
	if f.slot != "" {
		err = errors.Join(err, bench.DropSlot(context.Background(), f.env.Conn, f.slot))
		f.slot = ""
	}
	return err
}

// floorAt is when the floor received t's commit.
func (f *floor) at(t *bench.Txn) (time.Time, bool) {
	lt, ok := f.rl.Txn(t.Xid)
	return lt.Received, ok
}
