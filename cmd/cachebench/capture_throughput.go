package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/pggate"
)

// runCaptureThroughput measures the WAL capture path under concurrent writers with
// multi-row transactions: the rate the cache applies and its lag at a sustained write
// rate, then, on a backlog of the same workload, the rate at which the pipeline catches
// up beside the rate at which pg_recvlogical alone decodes that same WAL.
func runCaptureThroughput(ctx context.Context, args *bench.Args, w io.Writer) error {
	rate := args.Int("rate", 30000, "row changes per second, all writers together (0: as fast as they can)")
	writers := args.Int("writers", 4, "writer connections")
	rowsPerTxn := args.Int("rows-per-txn", 100, "row changes per transaction (a third inserts, a third deletes, the rest updates)")
	duration := args.Duration("duration", 10*time.Second, "sustained phase: measured run time")
	warmup := args.Duration("warmup", time.Second, "unmeasured writes before the sustained phase")
	live := args.Int("live", 5000, "rows each writer keeps in the table")
	pad := args.Int("pad", 100, "bytes of padding per row")
	drain := args.Bool("drain", true, "run the drain phase (the pipeline's and pg_recvlogical's rates on one backlog)")
	drainRows := args.Int("drain-rows", 0, "row changes in the drain phase's backlog (0: as many as the sustained phase wrote)")
	o := captureFlags(args)
	env, err := bench.NewDistEnv(ctx, args, bench.WorkloadSchema(captureTable))
	if err != nil {
		return err
	}
	defer env.Close()
	if *rate < 0 {
		return errors.New("-rate must not be negative")
	}

	wl, err := bench.NewWorkload(ctx, bench.WorkloadConfig{DSN: env.DSN, Table: captureTable, Writers: *writers, Live: *live, RowsPerTxn: *rowsPerTxn, Pad: *pad})
	if err != nil {
		return err
	}
	defer wl.Close()
	if err := wl.Populate(ctx); err != nil {
		return err
	}
	// For the drain, the distributor reaches PostgreSQL through a gate that can hold its
	// replication stream: a backlog then builds up in its own slot.
	dsn, via := env.DSN, ""
	var gate *pggate.Gate
	if *drain {
		if gate, dsn, err = pggate.Start(env.DSN); err != nil {
			return err
		}
		defer gate.Close()
		via = "; the distributor reaches PostgreSQL through an in-process TCP gate (for the drain)"
	}
	pipe, err := bench.StartPipeline(ctx, env, dsn, []distributor.ViewConfig{captureView}, o.distOpts()...)
	if err != nil {
		return err
	}
	defer pipe.Close()
	cache, err := bench.StartCache(ctx, pipe.Player.Addr(), pipe.Topic, map[string]cacheclient.Decoder[int64]{captureView.Name: bench.VersionDecoder})
	if err != nil {
		return err
	}
	defer cache.Close()

	target := fmt.Sprintf("%d row changes/s", *rate)
	if *rate == 0 {
		target = "as fast as they can"
	}
	fmt.Fprintf(w, "capture-throughput: %d writers, transactions of %d row changes (inserts, updates, deletes), %s for %v after a %v warm-up (%d live rows each, %d B of padding)\n",
		*writers, *rowsPerTxn, target, *duration, *warmup, *live, *pad)
	fmt.Fprintln(w, "path:", capturePath()+via)
	fmt.Fprintln(w, "lag = per transaction, the first cacheclient Get after a publication that shows its last updated row - the time just before COMMIT was sent (a source transaction is applied whole)")
	fmt.Fprintln(w)

	probe := cache.Probe(captureView.Name)
	hooks := bench.Hooks{BeforeCommit: func(t *bench.Txn) { probe.Expect(t, t.Key, t.Version) }}
	if *warmup > 0 {
		if _, err := wl.Run(ctx, bench.RunConfig{Rate: float64(*rate), Duration: *warmup, Hooks: hooks}); err != nil {
			return err
		}
		if err := probe.Wait(ctx, *o.timeout); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	// Sustained: the writers at the target rate, the cache live.
	txns, err := wl.Run(ctx, bench.RunConfig{Rate: float64(*rate), Duration: *duration, Hooks: hooks})
	if err != nil {
		return err
	}
	if err := probe.Wait(ctx, *o.timeout); err != nil {
		return err
	}
	rows := bench.Rows(txns)
	writeRate := float64(rows) / span(txns, func(t *bench.Txn) time.Time { return t.Done }).Seconds()
	applyRate := float64(rows) / span(txns, func(t *bench.Txn) time.Time { return t.Visible }).Seconds()
	lag := bench.Summarize(commitSpan(txns, visibleAt))
	fmt.Fprintf(w, "sustained: the writers committed %d row changes in %d transactions at %.0f rows/s (first COMMIT -> last COMMIT returned)\n", rows, len(txns), writeRate)
	if *rate > 0 && writeRate < 0.95*float64(*rate) {
		fmt.Fprintf(w, "  the writers did not reach the target rate on this machine (%.0f%% of %d rows/s)\n", 100*writeRate/float64(*rate), *rate)
	}
	fmt.Fprintf(w, "sustained: the cache applied them at %.0f rows/s (first COMMIT -> last transaction visible)\n", applyRate)
	fmt.Fprintln(w, lag.Line("sustained: lag commit -> visible"))

	var floorRate, drainRate float64
	if *drain {
		n := *drainRows
		if n <= 0 {
			n = int(rows)
		}
		if floorRate, drainRate, err = captureDrain(ctx, w, env, wl, gate, pipe, probe, o, (n+*rowsPerTxn-1) / *rowsPerTxn); err != nil {
			return err
		}
	}
	if err := wl.Check(ctx); err != nil {
		return err
	}

	fmt.Fprintln(w)
	goalAtLeast(w, "sustained apply rate", applyRate, 30000, " rows/s")
	goalAtMost(w, "sustained lag p99", lag.P99, 200*time.Millisecond)
	if *drain {
		goalAtLeast(w, "pipeline drain rate (charged) / pg_recvlogical's on the same backlog", 100*bench.Ratio(drainRate, floorRate), 50, "%")
		fmt.Fprintf(w, "(the sustained apply rate is %.0f%% of pg_recvlogical's: it cannot exceed the writers' rate)\n", 100*bench.Ratio(applyRate, floorRate))
	}
	return nil
}

// captureDrain writes txns transactions as fast as the writers can while the distributor's
// replication stream is held, then lets pg_recvlogical alone decode them from a slot
// created at the hold, then releases the distributor and times its catch-up until the
// cache shows the last transaction. It returns both rates, in row changes per second.
func captureDrain(ctx context.Context, w io.Writer, env *bench.DistEnv, wl *bench.Workload, gate *pggate.Gate,
	pipe *bench.Pipeline, probe *bench.Probe, o captureOpts, txns int) (floorRate, pipeRate float64, err error) {
	gate.Hold()
	released := false
	defer func() {
		if !released {
			gate.Release()
		}
	}()
	fl, err := newFloor(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	defer fl.close()
	_, start, err := pipe.SentLSN(ctx)
	if err != nil {
		return 0, 0, err
	}
	backlog, err := wl.Run(ctx, bench.RunConfig{Txns: txns, Hooks: bench.Hooks{BeforeCommit: func(t *bench.Txn) { probe.Expect(t, t.Key, t.Version) }}})
	if err != nil {
		return 0, 0, err
	}
	rows := bench.Rows(backlog)
	_, end, err := pipe.SentLSN(ctx)
	if err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(w, "\ndrain: %d row changes in %d transactions, %.1f MB of WAL, written as fast as the writers could while the distributor's replication stream was held\n",
		rows, len(backlog), float64(end-start)/1e6)

	// pg_recvlogical alone.
	if err := fl.start(o); err != nil {
		return 0, 0, err
	}
	if err := fl.rl.WaitXids(ctx, xids(backlog), *o.timeout); err != nil {
		return 0, 0, err
	}
	var last time.Time
	for _, t := range backlog {
		if at, _ := fl.at(t); at.After(last) {
			last = at
		}
	}
	d := last.Sub(fl.rl.Streaming())
	floorRate = float64(rows) / d.Seconds()
	fmt.Fprintf(w, "  %-58s %9.0f rows/s  (%.2f s)\n", "floor: pg_recvlogical alone (start of streaming -> last commit)", floorRate, d.Seconds())
	if err := fl.close(); err != nil {
		return 0, 0, err
	}

	// The pipeline alone. While held, its walsender kept decoding until the sockets were
	// full: that share of the backlog was decoded before the release. The pipeline is
	// charged the floor's time for that share, as if it had been decoded after the release
	// with nothing overlapping it: the rate judged can only be lower than the truth.
	sent, _, err := pipe.SentLSN(ctx)
	if err != nil {
		return 0, 0, err
	}
	share := 0.0
	if end > start && sent > start {
		share = min(1, float64(sent-start)/float64(end-start))
	}
	release := time.Now()
	gate.Release()
	released = true
	if err := probe.Wait(ctx, *o.timeout); err != nil {
		return 0, 0, err
	}
	last = time.Time{}
	for _, t := range backlog {
		if t.Visible.After(last) {
			last = t.Visible
		}
	}
	raw := last.Sub(release)
	charged := raw + time.Duration(share*float64(d))
	pipeRate = float64(rows) / charged.Seconds()
	fmt.Fprintf(w, "  %-58s %9.0f rows/s  (%.2f s)\n", "pipeline alone (release -> last transaction visible)", float64(rows)/raw.Seconds(), raw.Seconds())
	fmt.Fprintf(w, "  %-58s %9.0f rows/s  (%.2f s + %.0f%% of the floor's %.2f s)\n",
		"pipeline, charged for what was decoded while held", pipeRate, raw.Seconds(), 100*share, d.Seconds())
	fmt.Fprintf(w, "  (held, the server had decoded %.2f of the %.2f MB of WAL for the distributor: what its socket took)\n",
		float64(max(sent, start)-start)/1e6, float64(end-start)/1e6)
	return floorRate, pipeRate, nil
}
