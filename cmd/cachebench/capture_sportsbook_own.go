package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
)

// With -own-stream, capture-sportsbook publishes its single-table views twice: in the
// stream of every view, and in a stream of their own (a second pipeline: its own
// distributor, slot, publication, topic and player, read by a cacheclient of its own),
// both under the same writers. The two differ only in what shares their stream (its
// cycles, which read every view, its player and its cacheclient): the other views, or
// nothing. Their ratio separates the cost of sharing the stream from that of the load on
// the machine, which both see (and which the second pipeline adds to).

// sbPipeline is a pipeline publishing sportsbook views, a cache reading them with an
// ordered probe per view, and the distributor's metrics.
type sbPipeline struct {
	pipe  *bench.Pipeline
	cache *bench.Cache
	reg   *prometheus.Registry
	// started is Run → every view's first snapshot published; ready, from then to the
	// cache ready.
	started, ready time.Duration
}

// startSBPipeline starts a pipeline of views and its cache; close stops both.
func startSBPipeline(ctx context.Context, env *bench.DistEnv, o captureOpts, views []bench.SportsbookView) (*sbPipeline, error) {
	cfgs := make([]distributor.ViewConfig, len(views))
	decoders := map[string]cacheclient.Decoder[int64]{}
	for i, v := range views {
		cfgs[i] = v.Config()
		decoders[v.Name] = bench.SeqDecoder
	}
	p := &sbPipeline{reg: prometheus.NewRegistry()}
	start := time.Now()
	var err error
	if p.pipe, err = bench.StartPipeline(ctx, env, env.DSN, cfgs, append(o.distOpts(), distributor.WithRegisterer(p.reg))...); err != nil {
		return nil, err
	}
	p.started = time.Since(start)
	start = time.Now()
	if p.cache, err = bench.StartCache(ctx, p.pipe.Player.Addr(), p.pipe.Topic, decoders); err != nil {
		p.close()
		return nil, err
	}
	p.ready = time.Since(start)
	// One writer's commits reach every view in its commit order (one stream): each check
	// reads the rows it finds visible, not the whole backlog, so a distributor far behind
	// does not make the probes hold up the writers.
	for _, v := range views {
		p.cache.Probe(v.Name).Ordered()
	}
	return p, nil
}

func (p *sbPipeline) close() {
	if p.cache != nil {
		p.cache.Close()
	}
	_ = p.pipe.Close()
}

// cycles is the distributor's cycle-duration histogram.
func (p *sbPipeline) cycles() bench.Histogram {
	return bench.HistogramOf(p.reg, "statecast_distributor_cycle_duration_seconds")
}

// singleViews are the single-table views of views.
func singleViews(views []bench.SportsbookView) []bench.SportsbookView {
	var out []bench.SportsbookView
	for _, v := range views {
		if v.Single() {
			out = append(out, v)
		}
	}
	return out
}

// startOwnStream starts the single-table views' stream of their own and returns its
// probes by index in views (nil for the other views).
func startOwnStream(ctx context.Context, w io.Writer, env *bench.DistEnv, o captureOpts, views []bench.SportsbookView) (*sbPipeline, []*bench.Probe, error) {
	p, err := startSBPipeline(ctx, env, o, singleViews(views))
	if err != nil {
		return nil, nil, fmt.Errorf("the single-table views' own stream: %w", err)
	}
	probes := make([]*bench.Probe, len(views))
	for i, v := range views {
		if v.Single() {
			probes[i] = p.cache.Probe(v.Name)
		}
	}
	fmt.Fprintf(w, "own stream of the single-table views: the distributor published their first snapshot in %.1f s, the cache was ready %.1f s later\n",
		p.started.Seconds(), p.ready.Seconds())
	return p, probes, nil
}

// ownInfo prints the own stream's figures in the goals' section, as information: against
// capture-latency alone, and the shared stream's against them.
func ownInfo(w io.Writer, own, shared, alone bench.Summary) {
	for _, q := range []struct {
		name              string
		own, shared, base time.Duration
	}{{"p50", own.P50, shared.P50, alone.P50}, {"p99", own.P99, shared.P99, alone.P99}} {
		line := fmt.Sprintf("info single-table views, own stream %s: %s ms", q.name, bench.MS(q.own))
		if q.base > 0 {
			line += fmt.Sprintf(" = %.2f x capture-latency alone %s", bench.Ratio(q.own, q.base), q.name)
		}
		if q.own > 0 {
			line += fmt.Sprintf("; shared stream / own stream = %.2f x", bench.Ratio(q.shared, q.own))
		}
		fmt.Fprintln(w, line)
	}
}

// cyclesLine is a distributor's cycles over the whole run.
func cyclesLine(h bench.Histogram) string {
	return fmt.Sprintf("%d cycles, mean %s ms, p50 %s ms, p99 %s ms (quantiles from its histogram's buckets)",
		h.Count, bench.MS(h.Mean), bench.MS(h.P50), bench.MS(h.P99))
}
