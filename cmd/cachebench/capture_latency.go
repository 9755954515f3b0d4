package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
)

// waited is one WaitFor after a write.
type waited struct {
	t          *bench.Txn
	start, end time.Time
	err        error
}

// runCaptureLatency measures commit → visible in a cacheclient Get through the WAL capture
// path, for single-row inserts, updates and deletes at a steady rate, and WaitFor right
// after each write; beside them, the floor measured on the same WAL and workload at the
// same time: pg_recvlogical's commit → received on a slot of its own.
func runCaptureLatency(ctx context.Context, args *bench.Args, w io.Writer) error {
	rate := args.Int("rate", 1000, "single-row commits per second, all writers together")
	writers := args.Int("writers", 4, "writer connections")
	duration := args.Duration("duration", 10*time.Second, "measured run time (unless -count is set)")
	count := args.Int("count", 0, "measured commits (0: as many as -duration allows)")
	warmup := args.Duration("warmup", time.Second, "unmeasured writes before the measured run")
	live := args.Int("live", 1000, "rows each writer keeps in the table (a row is deleted that many inserts after its insert)")
	pad := args.Int("pad", 100, "bytes of padding per row")
	o := captureFlags(args)
	env, err := bench.NewDistEnv(ctx, args, bench.WorkloadSchema(captureTable))
	if err != nil {
		return err
	}
	defer env.Close()
	c := latencyConfig{rate: *rate, writers: *writers, duration: *duration, count: *count, warmup: *warmup, live: *live, pad: *pad}
	wl, err := c.workload(ctx, env)
	if err != nil {
		return err
	}
	defer wl.Close()

	limit := fmt.Sprintf("for %v", *duration)
	if *count > 0 {
		limit = fmt.Sprintf("until %d commits", *count)
	}
	fmt.Fprintf(w, "capture-latency: %d single-row commits/s from %d writers %s after a %v warm-up; each writer takes turns: insert, update, delete (%d live rows each, %d B of padding)\n",
		*rate, *writers, limit, *warmup, *live, *pad)
	fmt.Fprintln(w, "path:", capturePath())
	fmt.Fprintln(w, "commit -> visible = the first cacheclient Get after a publication that shows the row's new version (or, for a delete, no row) - the time just before COMMIT was sent")
	fmt.Fprintln(w, "floor = pg_recvlogical with pgoutput and the distributor's options (proto_version 1, binary) on a slot of its own, live over the same WAL: its commit message read from its output - the same COMMIT time")
	fmt.Fprintln(w, "        (pgoutput's messages are framed by their own lengths, so the floor decodes with the very plugin the distributor's slot uses)")
	fmt.Fprintln(w, "WaitFor = after COMMIT the writer reads pg_current_wal_insert_lsn() on its connection and calls cacheclient WaitFor with it")
	fmt.Fprintln(w, "context: the LogPlayer paper's log-store design reached 7.16 ms average, 12.47 ms p99 (8 vCPUs); its Kafka-EOS design 45 / 61 ms")
	fmt.Fprintln(w)

	r, err := c.measure(ctx, env, wl, o)
	if err != nil {
		return err
	}
	txns := r.txns
	achieved := float64(len(txns)) / span(txns, func(t *bench.Txn) time.Time { return t.Done }).Seconds()
	fmt.Fprintf(w, "achieved: %d commits at %.0f commits/s (target %d)\n", len(txns), achieved, *rate)
	if achieved < 0.95*float64(*rate) {
		fmt.Fprintf(w, "  the writers did not reach the target rate on this machine (%.0f%% of it): add -writers\n", 100*achieved/float64(*rate))
	}
	fmt.Fprintln(w, bench.Summarize(commitSpan(txns, func(t *bench.Txn) (time.Time, bool) { return t.Done, true })).Line("COMMIT round trip (info)"))
	for _, op := range bench.Ops {
		fmt.Fprintln(w, bench.Summarize(commitSpan(byOp(txns, op), r.floorAt)).Line("floor: pg_recvlogical, "+op.String()))
	}
	floorAll := bench.Summarize(commitSpan(txns, r.floorAt))
	fmt.Fprintln(w, floorAll.Line("floor: pg_recvlogical, all"))
	for _, op := range bench.Ops {
		fmt.Fprintln(w, bench.Summarize(commitSpan(byOp(txns, op), visibleAt)).Line("commit -> visible, "+op.String()))
	}
	vis := bench.Summarize(commitSpan(txns, visibleAt))
	fmt.Fprintln(w, vis.Line("commit -> visible, all"))

	var afterWrite, call []time.Duration
	var failed []error
	for _, wt := range r.waits {
		if wt.err != nil {
			failed = append(failed, wt.err)
			continue
		}
		afterWrite = append(afterWrite, wt.end.Sub(wt.t.Sent))
		call = append(call, wt.end.Sub(wt.start))
	}
	wf := bench.Summarize(afterWrite)
	fmt.Fprintln(w, wf.Line("WaitFor after the write: commit -> returned"))
	fmt.Fprintln(w, bench.Summarize(call).Line("WaitFor call alone (info)"))
	if len(failed) > 0 {
		fmt.Fprintf(w, "WaitFor failed %d times; the first: %v\n", len(failed), failed[0])
	}
	fmt.Fprintln(w)
	if vis.N > 0 && floorAll.N > 0 {
		fmt.Fprintf(w, "commit -> visible over the floor: p50 +%s ms, p99 +%s ms\n", bench.MS(vis.P50-floorAll.P50), bench.MS(vis.P99-floorAll.P99))
	}
	goalAtMost(w, "commit -> visible p50", vis.P50, 5*time.Millisecond)
	goalAtMost(w, "commit -> visible p99", vis.P99, 15*time.Millisecond)
	goalAtMostOf(w, "WaitFor p99 (commit -> returned)", "commit -> visible p99 + 5 ms = "+bench.MS(vis.P99+5*time.Millisecond)+" ms",
		wf.P99, vis.P99+5*time.Millisecond)
	if len(failed) > 0 {
		return fmt.Errorf("%d WaitFor calls failed", len(failed))
	}
	return nil
}

// latencyConfig is capture-latency's scenario: single-row commits at a steady rate, each
// writer taking turns with an insert, an update and a delete, WaitFor after each.
type latencyConfig struct {
	rate, writers, count, live, pad int
	duration, warmup                time.Duration
}

// workload connects the scenario's writers to captureTable (which env has) and populates
// it.
func (c latencyConfig) workload(ctx context.Context, env *bench.DistEnv) (*bench.Workload, error) {
	if c.rate <= 0 {
		return nil, errors.New("-rate must be positive")
	}
	wl, err := bench.NewWorkload(ctx, bench.WorkloadConfig{DSN: env.DSN, Table: captureTable, Writers: c.writers, Live: c.live, RowsPerTxn: 1, Pad: c.pad})
	if err != nil {
		return nil, err
	}
	if err := wl.Populate(ctx); err != nil {
		wl.Close()
		return nil, err
	}
	return wl, nil
}

// latencyResult is one run of the scenario: its measured transactions (Visible set), the
// WaitFor calls, and when the floor received each commit.
type latencyResult struct {
	txns  []*bench.Txn
	waits []waited
	floor map[uint32]time.Time
}

func (r *latencyResult) floorAt(t *bench.Txn) (time.Time, bool) {
	at, ok := r.floor[t.Xid]
	return at, ok
}

// measure runs the scenario with wl on a pipeline, a cache and a floor of its own, all
// closed when it returns: the warm-up, then the measured run, until every commit is
// visible, received by the floor and returned from WaitFor.
func (c latencyConfig) measure(ctx context.Context, env *bench.DistEnv, wl *bench.Workload, o captureOpts) (*latencyResult, error) {
	pipe, err := bench.StartPipeline(ctx, env, env.DSN, []distributor.ViewConfig{captureView}, o.distOpts()...)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	cache, err := bench.StartCache(ctx, pipe.Player.Addr(), pipe.Topic, map[string]cacheclient.Decoder[int64]{captureView.Name: bench.VersionDecoder})
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	fl, err := newFloor(ctx, env)
	if err != nil {
		return nil, err
	}
	defer fl.close()
	if err := fl.start(o); err != nil {
		return nil, err
	}

	probe := cache.Probe(captureView.Name)
	expect := func(t *bench.Txn) { probe.Expect(t, t.Key, t.Version) }
	if c.warmup > 0 {
		warm, err := wl.Run(ctx, bench.RunConfig{Rate: float64(c.rate), Duration: c.warmup, Hooks: bench.Hooks{BeforeCommit: expect}})
		if err != nil {
			return nil, err
		}
		if err := probe.Wait(ctx, *o.timeout); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := fl.rl.WaitXids(ctx, xids(warm), *o.timeout); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}

	var (
		mu    sync.Mutex
		waits []waited
		wg    sync.WaitGroup
	)
	// The waiters get -timeout from the end of the run (set below).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	afterCommit := func(t *bench.Txn) {
		wg.Go(func() {
			wt := waited{t: t, start: time.Now()}
			pos, err := cacheclient.ParseLSN(t.LSN)
			if err == nil {
				err = cache.Client.WaitFor(wctx, pos)
			}
			wt.end = time.Now()
			wt.err = err
			mu.Lock()
			waits = append(waits, wt)
			mu.Unlock()
		})
	}
	rc := bench.RunConfig{Rate: float64(c.rate), Hooks: bench.Hooks{BeforeCommit: expect, AfterCommit: afterCommit, ReadLSN: true}}
	if c.count > 0 {
		rc.Txns = c.count
	} else {
		rc.Duration = c.duration
	}
	txns, err := wl.Run(ctx, rc)
	if err != nil {
		return nil, err
	}
	timer := time.AfterFunc(*o.timeout, cancel)
	defer timer.Stop()
	if err := probe.Wait(ctx, *o.timeout); err != nil {
		return nil, err
	}
	if err := fl.rl.WaitXids(ctx, xids(txns), *o.timeout); err != nil {
		return nil, err
	}
	wg.Wait()
	if err := wl.Check(ctx); err != nil {
		return nil, err
	}
	r := &latencyResult{txns: txns, waits: waits, floor: map[uint32]time.Time{}}
	for _, t := range txns {
		if at, ok := fl.at(t); ok {
			r.floor[t.Xid] = at
		}
	}
	return r, nil
}
