package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
)

// sportsbookFloorPub is the publication of the sportsbook floor's slot.
const sportsbookFloorPub = "bench_floor_sb"

// Goals of capture-sportsbook: a view of any shape as fast as the single-table views of
// the same stream, and those as fast as a stream of one single-table view.
const (
	shapeFactor  = 1.5
	singleFactor = 1.2
)

// sbSeen is one view's share of one transaction: the probe's handle, whose Visible is when
// every row the transaction changes in the view showed it.
type sbSeen struct {
	txn  *bench.SportsbookTxn
	view int // index in the run's views
	seen *bench.Txn
}

// runCaptureSportsbook measures commit → visible per view of one stream of sportsbook
// views — single-table ones beside joins, aggregates and the other shapes — under
// writers of multi-row transactions; beside them, in the same run, pg_recvlogical's
// commit → received on the same WAL, and capture-latency's scenario alone on a pipeline of
// its own before and after the workload.
func runCaptureSportsbook(ctx context.Context, args *bench.Args, w io.Writer) error {
	duration := args.Duration("duration", 60*time.Second, "measured steady state")
	warmup := args.Duration("warmup", 10*time.Second, "unmeasured writes before the steady state (the writers do not pause between them)")
	rate := args.Int("rate", 1000, "commits per second, all writers together")
	writers := args.Int("writers", 4, "writer connections")
	scale := args.Float64("scale", 1, "multiplier of the schema's size (1: 20,000 events, 100,000 markets, 300,000 selections, 1,000,000 bets)")
	viewList := args.String("views", "", "comma-separated views to run beside the single-table ones (default all: "+shapeViewNames()+")")
	alone := args.Duration("alone", 10*time.Second, "capture-latency's measured run alone, before and after the workload (0: skip)")
	seed := args.Uint64("seed", 1, "seed of the writers' choices")
	readConns := args.Int("read-connections", 0, "the stream's read_connections (0: the distributor's default)")
	own := args.Bool("own-stream", false, "also publish the single-table views in a stream of their own (a second distributor, slot, topic, player and cacheclient) during the same workload, measured the same way (info; it adds to the machine's load)")
	o := captureFlags(args)
	env, err := bench.NewDistEnv(ctx, args, bench.SportsbookSchema+";"+bench.WorkloadSchema(captureTable))
	if err != nil {
		return err
	}
	defer env.Close()
	views, err := bench.SportsbookViewsNamed(*viewList)
	if err != nil {
		return err
	}
	if *readConns > 0 {
		bench.StreamTuning = func(s *distributor.StreamConfig) { s.ReadConnections = *readConns }
	}
	if *rate <= 0 || *writers < 1 || *scale <= 0 || *duration <= 0 || *warmup < 0 || *alone < 0 {
		return errors.New("-rate, -writers, -scale and -duration must be positive, -warmup and -alone not negative")
	}
	size := bench.SportsbookSizeOf(*scale)
	lat := latencyConfig{rate: 1000, writers: 4, duration: *alone, warmup: time.Second, live: 1000, pad: 100}

	fmt.Fprintf(w, "capture-sportsbook: %v\n", size)
	start := time.Now()
	if err := bench.SeedSportsbook(ctx, env.Conn, size); err != nil {
		return err
	}
	fmt.Fprintf(w, "seeded with generate_series in %.1f s (indexes, foreign keys, VACUUM ANALYZE included)\n", time.Since(start).Seconds())
	shapes := 0
	for _, v := range views {
		if !v.Single() {
			shapes++
		}
	}
	var kinds []string
	for _, k := range bench.SportsbookKinds {
		kinds = append(kinds, fmt.Sprintf("%s %d%%", k.Kind, k.Share))
	}
	fmt.Fprintf(w, "one stream of %d views (%d single-table, %d of other shapes); %d writers, %d commits/s together, %v measured after a %v warm-up; transactions: %s\n",
		len(views), len(views)-shapes, shapes, *writers, *rate, *duration, *warmup, strings.Join(kinds, ", "))
	fmt.Fprintln(w, "path:", capturePath())
	fmt.Fprintln(w, "commit -> visible, per view = the first cacheclient Get after a publication in which every row of the view that the commit changes shows its seq - the time just before COMMIT was sent")
	fmt.Fprintln(w, "floor = pg_recvlogical (pgoutput, the distributor's options) on a slot of its own over the sportsbook's tables, live over the same WAL: its commit message read - the same COMMIT time")
	if *own {
		fmt.Fprintln(w, "own stream = the single-table views (same SQL) also published by a pipeline of their own (distributor, slot, publication, topic, player, cacheclient), live over the same WAL, measured the same way")
	}
	if *alone > 0 {
		fmt.Fprintf(w, "capture-latency alone = its scenario (%d single-row commits/s from %d writers, WaitFor after each) on a pipeline of its own, %v before and %v after the workload, the sportsbook's pipeline stopped\n",
			lat.rate, lat.writers, *alone, *alone)
	}
	fmt.Fprintln(w)

	var wl *bench.Workload
	var alonePool bench.Pool
	var aloneFloor []time.Duration
	aloneRound := func(name string) error {
		if *alone <= 0 {
			return nil
		}
		if wl == nil {
			if wl, err = lat.workload(ctx, env); err != nil {
				return err
			}
		}
		r, err := lat.measure(ctx, env, wl, o)
		if err != nil {
			return fmt.Errorf("capture-latency alone, %s: %w", name, err)
		}
		vis := commitSpan(r.txns, visibleAt)
		fl := commitSpan(r.txns, r.floorAt)
		alonePool.Add(vis)
		aloneFloor = append(aloneFloor, fl...)
		achieved := float64(len(r.txns)) / span(r.txns, func(t *bench.Txn) time.Time { return t.Done }).Seconds()
		fmt.Fprintf(w, "capture-latency alone, %s: %d commits at %.0f commits/s\n", name, len(r.txns), achieved)
		fmt.Fprintln(w, bench.Summarize(fl).Line("capture-latency alone, "+name+": floor"))
		fmt.Fprintln(w, bench.Summarize(vis).Line("capture-latency alone, "+name+": visible"))
		return nil
	}
	defer func() {
		if wl != nil {
			wl.Close()
		}
	}()
	if err := aloneRound("before"); err != nil {
		return err
	}

	res, err := sportsbookRun(ctx, w, env, o, sportsbookConfig{size: size, views: views, writers: *writers, rate: *rate,
		warmup: *warmup, duration: *duration, seed: *seed, own: *own})
	if err != nil {
		return err
	}

	fmt.Fprintln(w)
	if err := aloneRound("after"); err != nil {
		return err
	}
	fmt.Fprintln(w)
	res.print(w, alonePool, aloneFloor)
	return nil
}

// shapeViewNames lists the views of other shapes than a single table, for -views' help.
func shapeViewNames() string {
	var names []string
	for _, v := range bench.SportsbookViews {
		if !v.Single() {
			names = append(names, v.Name)
		}
	}
	return strings.Join(names, ", ")
}

// sportsbookConfig is the workload phase of capture-sportsbook.
type sportsbookConfig struct {
	size             bench.SportsbookSize
	views            []bench.SportsbookView
	writers, rate    int
	warmup, duration time.Duration
	seed             uint64
	own              bool // the single-table views also in a stream of their own
}

// sportsbookResult is what the workload phase measured.
type sportsbookResult struct {
	views    []bench.SportsbookView
	txns     []*bench.SportsbookTxn // the measured ones
	seen     []sbSeen               // of the measured transactions
	own      []sbSeen               // the same in the single-table views' own stream (-own-stream)
	floor    []time.Duration        // commit -> received by pg_recvlogical, measured transactions
	rate     float64                // commits per second achieved, measured
	target   int
	start    time.Time     // of the steady state
	duration time.Duration // of the steady state
	deadline time.Time     // the end of the wait for the last commits: the time of the ones not visible by then
	// drain is from the writers' last commit to the last commit visible in every view;
	// pending, per view, the commits not visible yet when the writers stopped.
	drain   time.Duration
	pending []int
	cycles  bench.Histogram
	// ownCycles are the own stream's distributor's (-own-stream; Count 0 without).
	ownCycles bench.Histogram
	rereads   map[string]float64
	reads     map[string]float64 // seconds the cycles spent re-reading each view's changed rows
}

// sportsbookRun seeds nothing: it runs the sportsbook's pipeline, cache and floor on the
// seeded tables, the writers for the warm-up and the steady state, waits until every
// commit is visible in every view (or -timeout), and stops them all.
func sportsbookRun(ctx context.Context, w io.Writer, env *bench.DistEnv, o captureOpts, c sportsbookConfig) (*sportsbookResult, error) {
	sp, err := startSBPipeline(ctx, env, o, c.views)
	if err != nil {
		return nil, err
	}
	defer sp.close()
	fmt.Fprintf(w, "\nsportsbook pipeline: the distributor published every view's first snapshot in %.1f s, the cache was ready %.1f s later\n",
		sp.started.Seconds(), sp.ready.Seconds())
	fmt.Fprintln(w, "how the distributor maps each view's tables to its rows:")
	deps := sp.pipe.Dependencies()
	for _, v := range c.views {
		shape := "a single table"
		if !v.Single() {
			shape = v.Shape
		}
		fmt.Fprintf(w, "  %s — %s\n", v.Name, shape)
		for _, d := range deps {
			if line, ok := strings.CutPrefix(d, v.Name+": "); ok {
				fmt.Fprintf(w, "      %s\n", line)
			}
		}
	}
	fl, err := newFloorOf(ctx, env, sportsbookFloorPub, func() error { return bench.SportsbookPublication(ctx, env.Conn, sportsbookFloorPub) })
	if err != nil {
		return nil, err
	}
	defer fl.close()
	if err := fl.start(o); err != nil {
		return nil, err
	}
	var own *sbPipeline
	var ownProbes []*bench.Probe // by view index; nil: not in the own stream
	if c.own {
		if own, ownProbes, err = startOwnStream(ctx, w, env, o, c.views); err != nil {
			return nil, err
		}
		defer own.close()
	}
	sb, err := bench.NewSportsbook(ctx, env.DSN, c.size, c.writers, c.seed)
	if err != nil {
		return nil, err
	}
	defer sb.Close()

	index := map[string]int{}
	probes := make([]*bench.Probe, len(c.views))
	for i, v := range c.views {
		index[v.Name] = i
		probes[i] = sp.cache.Probe(v.Name)
	}
	// Per writer: BeforeCommit runs on the writer's goroutine.
	seen, ownSeen := make([][]sbSeen, c.writers), make([][]sbSeen, c.writers)
	expect := func(p *bench.Probe, t *bench.SportsbookTxn, i int, keys []string) sbSeen {
		s := &bench.Txn{Writer: t.Writer, Xid: t.Xid, Version: t.Version, Op: bench.OpMixed}
		for _, k := range keys {
			p.Expect(s, k, t.Version)
		}
		return sbSeen{txn: t, view: i, seen: s}
	}
	before := func(t *bench.SportsbookTxn) {
		for _, vk := range t.Expect {
			i, ok := index[vk.View]
			if !ok {
				continue // a view not in this run
			}
			seen[t.Writer] = append(seen[t.Writer], expect(probes[i], t, i, vk.Keys))
			if own != nil && ownProbes[i] != nil {
				ownSeen[t.Writer] = append(ownSeen[t.Writer], expect(ownProbes[i], t, i, vk.Keys))
			}
		}
	}
	runStart := time.Now()
	all, err := sb.Run(ctx, bench.SportsbookRun{Rate: float64(c.rate), Duration: c.warmup + c.duration, BeforeCommit: before})
	if err != nil {
		return nil, err
	}
	stopped := time.Now()
	measured := runStart.Add(c.warmup)

	// Every commit visible in every view, or the timeout: a distributor that cannot keep
	// up still ends the run, and the commits it has not shown count at the deadline.
	deadline := time.Now().Add(*o.timeout)
	var waitErrs []error
	wait := func(name string, p *bench.Probe) error {
		if p == nil {
			return nil
		}
		if err := p.Wait(ctx, max(time.Millisecond, time.Until(deadline))); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			waitErrs = append(waitErrs, fmt.Errorf("%s: %w", name, err))
		}
		return nil
	}
	for i, p := range probes {
		if err := wait(c.views[i].Name, p); err != nil {
			return nil, err
		}
	}
	for i, p := range ownProbes {
		if err := wait(c.views[i].Name+" (own stream)", p); err != nil {
			return nil, err
		}
	}
	if len(waitErrs) == 0 {
		deadline = time.Now()
	}
	for _, p := range append(probes, ownProbes...) {
		if p != nil {
			p.Close() // nothing is marked visible after the deadline
		}
	}
	xs := make([]uint32, len(all))
	for i, t := range all {
		xs[i] = t.Xid
	}
	if err := fl.rl.WaitXids(ctx, xs, *o.timeout); err != nil {
		return nil, err
	}
	if err := sb.Check(ctx); err != nil {
		return nil, err
	}

	r := &sportsbookResult{views: c.views, target: c.rate, start: measured, duration: c.duration, deadline: deadline, pending: make([]int, len(c.views)),
		cycles:  sp.cycles(),
		rereads: bench.CounterSum(sp.reg, "statecast_distributor_full_rereads_total", "view"),
		reads:   bench.CounterSum(sp.reg, "statecast_distributor_view_read_seconds_total", "view")}
	if own != nil {
		r.ownCycles = own.cycles()
		for _, ss := range ownSeen {
			for _, s := range ss {
				if !s.txn.Sent.Before(measured) {
					r.own = append(r.own, s)
				}
			}
		}
	}
	var lastDone, lastVisible time.Time
	for _, t := range all {
		if !t.Sent.Before(measured) {
			r.txns = append(r.txns, t)
			if at, ok := fl.rl.Txn(t.Xid); ok {
				r.floor = append(r.floor, at.Received.Sub(t.Sent))
			}
		}
		if t.Done.After(lastDone) {
			lastDone = t.Done
		}
	}
	for _, ss := range seen {
		for _, s := range ss {
			if s.seen.Visible.IsZero() || s.seen.Visible.After(stopped) {
				r.pending[s.view]++
			}
			if s.seen.Visible.After(lastVisible) {
				lastVisible = s.seen.Visible
			}
			if !s.txn.Sent.Before(measured) {
				r.seen = append(r.seen, s)
			}
		}
	}
	r.drain = lastVisible.Sub(lastDone)
	if len(r.txns) > 0 {
		first := r.txns[0].Sent
		for _, t := range r.txns {
			if t.Sent.Before(first) {
				first = t.Sent
			}
		}
		r.rate = float64(len(r.txns)) / lastDone.Sub(first).Seconds()
	}
	for _, err := range waitErrs {
		fmt.Fprintf(w, "not visible within -timeout %v: %v\n", *o.timeout, err)
	}
	return r, nil
}

// spans is commit → visible of the measured commits in the views keep keeps, those not
// visible by the deadline counted at it; missed is how many those were.
func (r *sportsbookResult) spans(keep func(view int) bool) (out []time.Duration, missed int) {
	return spansOf(r.seen, r.deadline, keep)
}

// spansOf is spans of seen, with deadline.
func spansOf(seen []sbSeen, deadline time.Time, keep func(view int) bool) (out []time.Duration, missed int) {
	for _, s := range seen {
		if !keep(s.view) {
			continue
		}
		at := s.seen.Visible
		if at.IsZero() {
			at, missed = deadline, missed+1
		}
		out = append(out, at.Sub(s.txn.Sent))
	}
	return out, missed
}

func (r *sportsbookResult) print(w io.Writer, alone bench.Pool, aloneFloor []time.Duration) {
	kinds := map[string]int{}
	for _, t := range r.txns {
		kinds[t.Kind]++
	}
	var ks []string
	for _, k := range bench.SportsbookKinds {
		ks = append(ks, fmt.Sprintf("%s %d", k.Kind, kinds[k.Kind]))
	}
	fmt.Fprintf(w, "achieved: %d commits at %.0f commits/s (target %d): %s\n", len(r.txns), r.rate, r.target, strings.Join(ks, ", "))
	if r.rate < 0.95*float64(r.target) {
		fmt.Fprintf(w, "  the writers did not reach the target rate on this machine (%.0f%% of it)\n", 100*r.rate/float64(r.target))
	}
	var commit []time.Duration
	for _, t := range r.txns {
		commit = append(commit, t.Done.Sub(t.Sent))
	}
	fmt.Fprintln(w, bench.Summarize(commit).Line("COMMIT round trip (info)"))
	floor := bench.Summarize(r.floor)
	fmt.Fprintln(w, floor.Line("floor: pg_recvlogical, sportsbook commits"))
	fmt.Fprintln(w)

	single, singleMissed := r.spans(func(i int) bool { return r.views[i].Single() })
	base, aloneSum := bench.Summarize(single), alone.Summary()
	fmt.Fprintf(w, "%-28s %-6s %-9s %-9s %-9s %-7s %-7s %-7s %s\n", "commit -> visible", "n", "p50 ms", "p99 ms", "max ms",
		"p50", "p99", "p50", "p99")
	fmt.Fprintf(w, "%-64s %-15s %s\n", "", "/ single-table", "/ capture-latency alone")
	row := func(name string, s bench.Summary, missed int) {
		note := ""
		if missed > 0 {
			note = fmt.Sprintf("  (%d not visible within -timeout: counted at it)", missed)
		}
		ratio := func(a, b time.Duration) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", bench.Ratio(a, b))
		}
		fmt.Fprintf(w, "%-28s %-6d %-9.2f %-9.2f %-9.2f %-7s %-7s %-7s %s%s\n", name, s.N, float64(s.P50)/1e6, float64(s.P99)/1e6, float64(s.Max)/1e6,
			ratio(s.P50, base.P50), ratio(s.P99, base.P99), ratio(s.P50, aloneSum.P50), ratio(s.P99, aloneSum.P99), note)
	}
	sums := make([]bench.Summary, len(r.views))
	for i, v := range r.views {
		ds, missed := r.spans(func(j int) bool { return j == i })
		sums[i] = bench.Summarize(ds)
		row(v.Name, sums[i], missed)
	}
	row("single-table views, pooled", base, singleMissed)
	var own bench.Summary
	if len(r.own) > 0 {
		ownSpans, ownMissed := spansOf(r.own, r.deadline, func(int) bool { return true })
		own = bench.Summarize(ownSpans)
		row("single-table, own stream", own, ownMissed)
	}
	if aloneSum.N > 0 {
		fmt.Fprintln(w, bench.Summarize(aloneFloor).Line("capture-latency alone: floor"))
		fmt.Fprintln(w, aloneSum.Line("capture-latency alone: visible")+alone.Spread())
	}
	fmt.Fprintln(w)

	// The lag over the run: a pipeline that keeps up has the same p50 from the first
	// window to the last; one that falls behind grows.
	if len(r.txns) > 0 {
		const window = 10 * time.Second
		var lines []string
		for from := time.Duration(0); from < r.duration; from += window {
			// The last window also holds the commits a writer sent just after the end (it
			// began them before).
			last := from+window >= r.duration
			var sv, ss []time.Duration
			for _, s := range r.seen {
				d := s.txn.Sent.Sub(r.start)
				if d < from || d >= from+window && !last {
					continue
				}
				at := s.seen.Visible
				if at.IsZero() {
					at = r.deadline
				}
				if r.views[s.view].Single() {
					ss = append(ss, at.Sub(s.txn.Sent))
				} else {
					sv = append(sv, at.Sub(s.txn.Sent))
				}
			}
			if len(sv)+len(ss) == 0 {
				continue
			}
			a, b := bench.Summarize(ss), bench.Summarize(sv)
			lines = append(lines, fmt.Sprintf("  commits %3.0f-%3.0f s: single-table p50 %s p99 %s ms; other shapes p50 %s p99 %s ms",
				from.Seconds(), min(from+window, r.duration).Seconds(), bench.MS(a.P50), bench.MS(a.P99), bench.MS(b.P50), bench.MS(b.P99)))
		}
		fmt.Fprintln(w, "lag over the steady state, by commit time:")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	var pend []string
	for i, v := range r.views {
		if r.pending[i] > 0 {
			pend = append(pend, fmt.Sprintf("%s %d", v.Name, r.pending[i]))
		}
	}
	if len(pend) == 0 {
		pend = []string{"none"}
	}
	fmt.Fprintf(w, "backlog when the writers stopped (commits not visible yet, per view): %s\n", strings.Join(pend, ", "))
	if _, missed := r.spans(func(int) bool { return true }); missed > 0 {
		fmt.Fprintf(w, "drain: not done within -timeout (measured commits still not visible in a view: %d)\n", missed)
	} else {
		fmt.Fprintf(w, "drain: the last commit visible in every view %.2f s after the writers' last commit\n", r.drain.Seconds())
	}
	var rr []string
	for _, v := range r.views {
		if n := r.rereads[v.Name]; n > 0 {
			rr = append(rr, fmt.Sprintf("%s %.0f", v.Name, n))
		}
	}
	if len(rr) == 0 {
		rr = []string{"none"}
	}
	fmt.Fprintf(w, "distributor, whole run: %s; full re-reads of a view: %s\n", cyclesLine(r.cycles), strings.Join(rr, ", "))
	if r.ownCycles.Count > 0 {
		fmt.Fprintf(w, "own stream's distributor, whole run: %s\n", cyclesLine(r.ownCycles))
	}
	var reads []string
	for _, v := range r.views {
		if sec := r.reads[v.Name]; sec > 0 && r.cycles.Count > 0 {
			reads = append(reads, fmt.Sprintf("%s %.1f", v.Name, 1000*sec/float64(r.cycles.Count)))
		}
	}
	if len(reads) > 0 {
		fmt.Fprintf(w, "re-reading each view's changed rows, ms per cycle: %s\n", strings.Join(reads, ", "))
	}
	fmt.Fprintln(w)

	met, goals := 0, 0
	goal := func(what, baseName string, got, baseline time.Duration, factor float64) {
		limit := time.Duration(factor * float64(baseline))
		ok := baseline > 0 && got <= limit
		goals++
		if ok {
			met++
		}
		fmt.Fprintf(w, "goal %-36s <= %.1f x %s (%s ms): %s ms = %.2f x  %s\n", what, factor, baseName, bench.MS(limit), bench.MS(got),
			bench.Ratio(got, baseline), bench.Verdict(ok))
	}
	for i, v := range r.views {
		if v.Single() {
			continue
		}
		goal(v.Name+" p50", "single-table p50", sums[i].P50, base.P50, shapeFactor)
		goal(v.Name+" p99", "single-table p99", sums[i].P99, base.P99, shapeFactor)
	}
	if aloneSum.N > 0 {
		goal("single-table views p50", "capture-latency alone p50", base.P50, aloneSum.P50, singleFactor)
		goal("single-table views p99", "capture-latency alone p99", base.P99, aloneSum.P99, singleFactor)
	}
	if own.N > 0 {
		ownInfo(w, own, base, aloneSum)
	}
	fmt.Fprintf(w, "%d of %d goals met\n", met, goals)
	if _, missed := r.spans(func(int) bool { return true }); missed > 0 {
		fmt.Fprintf(w, "(commits not visible in a view within -timeout: %d; their times, counted at it, are lower bounds)\n", missed)
	}
}
