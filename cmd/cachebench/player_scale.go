package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/player"
)

// runPlayerScale: one in-process player, S subscribers spread over V views (subscriber i
// wants view i mod V), R entries/s of B bytes spread over the views (so each entry reaches
// S/V subscribers); subscriber 0 is stalled: it subscribes to every view and never reads,
// so its traffic (R x B per second) passes the byte budget within seconds. Reports the
// lag (produce → applied, Kafka-ack → applied) of the live subscribers, the player's
// per-target queue bytes (its metric) for the stalled target and the largest, and the
// process heap (player + producer + all receivers: an upper bound of the player's).
func runPlayerScale(ctx context.Context, args *bench.Args, w io.Writer) error {
	subs := args.Int("subscribers", 1000, "subscribers")
	views := args.Int("views", 100, "views")
	rate := args.Int("rate", 10000, "entries per second")
	size := args.Int("size", 200, "entry size in bytes")
	dur := args.Duration("duration", 15*time.Second, "measured time")
	warm := args.Duration("warmup", 3*time.Second, "warm-up (not measured)")
	budget := args.Int64("budget", 4<<20, "player target_budget_bytes")
	conns := args.Int("conns", 20, "client connections carrying the subscribers")
	bare := args.Bool("bare", true, "also run the bare gRPC fan-out baseline (same routing, a frame per entry)")
	bs, err := args.Parse()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "player-scale: %d subscribers over %d views (%d per view), %d entries/s of %d B, subscriber 0 stalled, budget %d B/target, %s measured after %s, %s\n",
		*subs, *views, *subs / *views, *rate, *size, *budget, *dur, *warm, bench.Layout())
	total := int(float64(*rate) * (*dur + *warm).Seconds())
	warmN := int(float64(*rate) * warm.Seconds())
	if *bare {
		if err := scaleBare(ctx, w, *subs, *views, *rate, *size, total, warmN, *conns); err != nil {
			return err
		}
	}
	runtime.GC() // the baseline's buffers must not count in the player's heap
	topic, drop, err := bench.NewTopic(bs, "bench_scale")
	if err != nil {
		return err
	}
	defer drop()
	pr, err := bench.StartPlayer(bs, topic, func(c *player.Config) { c.TargetBudgetBytes = *budget })
	if err != nil {
		return err
	}
	defer pr.Close()
	start := time.Now()
	err = pr.Connect(bench.Targets{N: *subs, Conns: *conns,
		Views: func(i int) []string {
			if i == 0 {
				return nil // the stalled subscriber wants every view: 10x the traffic of the others
			}
			return []string{"v" + strconv.Itoa(i%*views)}
		},
		Stalled:   func(i int) bool { return i == 0 },
		Unchecked: true, // the checker's records would dominate the heap
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d subscribers admitted in %.1fs\n", *subs, time.Since(start).Seconds())

	var maxHeap, maxStalled, maxQueue, maxSum int64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		maxHeap = max(maxHeap, int64(ms.HeapInuse))
		var sum int64
		for _, s := range pr.P.Status().Streams {
			for _, t := range s.Targets {
				sum += t.QueueBytes
				maxQueue = max(maxQueue, t.QueueBytes)
				if t.ID == "t0" {
					maxStalled = max(maxStalled, t.QueueBytes)
				}
			}
		}
		maxSum = max(maxSum, sum)
	}
	stopSampling := bench.Every(250*time.Millisecond, sample)
	defer stopSampling()
	p, err := bench.NewProducer(bs, topic)
	if err != nil {
		return err
	}
	perView := make([]int, *views)
	bench.Pace(ctx, *rate, func(i int) bool {
		if i >= total {
			return false
		}
		v := i % *views
		perView[v]++
		p.Send("v"+strconv.Itoa(v), (i / *views)%100, *size)
		return true
	})
	if err := p.Close(); err != nil {
		return err
	}
	ok := bench.WaitFor(2*time.Minute, func() bool { return allRouted(pr.Recv, perView) })
	stopSampling()
	sample()
	if !ok {
		return fmt.Errorf("live subscribers did not get all their entries")
	}
	// The first warmN records are offsets < warmN (the topic is fresh).
	st, ak, _ := bench.Latencies(pr.Recv, int64(warmN), p.Acks)
	stalled := "no longer connected (suspended: ack time-out or stream error)"
	for _, s := range pr.P.Status().Streams {
		for _, t := range s.Targets {
			if t.ID == "t0" {
				stalled = fmt.Sprintf("state %s, last ack %d, queue %d B, unacked batches %d, overflows %d, recoveries %d",
					t.State, t.LastAck, t.QueueBytes, t.Unacked, t.Overflows, t.Recoveries)
			}
		}
	}
	fmt.Fprintf(w, "player: lag produce→applied    %s\n", bench.Summarize(st))
	fmt.Fprintf(w, "player: lag kafka-ack→applied  %s\n", bench.Summarize(ak))
	fmt.Fprintf(w, "goal: lag p99 <= 100 ms\n")
	fmt.Fprintf(w, "stalled target t0: max queue %d B (budget %d B); at end: %s\n", maxStalled, *budget, stalled)
	fmt.Fprintf(w, "largest target queue %d B; all targets' queues max %d B; process heap in use max %.1f MB (player + producer + %d receivers)\n",
		maxQueue, maxSum, float64(maxHeap)/1e6, *subs)
	return nil
}

// allRouted reports whether every live receiver i got the entries of its view, i mod
// len(perView) (perView[v] entries were sent to view v).
func allRouted(rs []*bench.Receiver, perView []int) bool {
	for i, r := range rs {
		if !r.Stalled && r.Count() < perView[i%len(perView)] {
			return false
		}
	}
	return true
}

// scaleBare is the same routing on the bare gRPC fan-out: entry i goes, as a one-entry
// frame encoded once, to the subscribers of view i mod views; lag = dispatch → applied.
func scaleBare(ctx context.Context, w io.Writer, subs, views, rate, size, total, warmN, conns int) error {
	b, err := bench.StartBare(subs, conns, func(i int) bool { return i == 0 })
	if err != nil {
		return err
	}
	defer b.Close()
	byView := make([][]int, views)
	for i := range subs {
		if i != 0 { // a stalled stream would block this simple fan-out (no budget logic): left out
			byView[i%views] = append(byView[i%views], i)
		}
	}
	perView := make([]int, views)
	bench.Pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		v := i % views
		perView[v]++
		e := bench.BareEntry(i, size, 100)
		e.View = "v" + strconv.Itoa(v)
		b.PublishTo(byView[v], bench.EncodeBatch(e))
		return true
	})
	if !bench.WaitFor(2*time.Minute, func() bool { return allRouted(b.Recv, perView) }) {
		return fmt.Errorf("bare fan-out: subscribers did not get all their entries")
	}
	st, _, _ := bench.Latencies(b.Recv, int64(warmN), nil)
	fmt.Fprintf(w, "bare gRPC fan-out: lag dispatch→applied  %s\n", bench.Summarize(st))
	return nil
}
