package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
)

// cell is one (targets, entry size) cell of player-delay: total entries at rate, the
// first warm of them not measured, keys distinct keys.
type cell struct {
	targets, size, rate, total, warm, keys int
}

// runPlayerDelay measures the delivery delay for each (targets, entry size) cell at a fixed
// rate, for the systems run one after the other in this process:
//
//   - bare: a bare gRPC fan-out (each entry a batch of one, encoded once, one goroutine per
//     stream, no queues/terms/acks logic), entries generated in process, stamped at dispatch;
//     delay = dispatch → applied at the receiver;
//   - barekafka: the bare fan-out fed from Kafka (runBareKafkaCell);
//   - kafka: the entries produced to a topic and read by one plain sarama consumer per
//     target; produce → applied and Kafka-ack → applied;
//   - player: the same production, an in-process player, one Subscribe stream per target;
//     produce → applied, Kafka-ack → applied, dispatch → applied (the dispatch time comes
//     from player.WithDispatchHook: the span the bare fan-out measures, compared with it),
//     and the player's own dispatch → written-to-the-stream histogram
//     (statecast_player_delivery_delay_seconds); plus the targets' budget overflows and
//     recoveries and the mean entries per batch frame.
//
// Every receiver runs in this process (goroutines over loopback TCP), the same receiver
// code for all systems (each records its frames in a delivery checker). With -rounds N
// the systems run N times alternately and the samples are pooled.
func runPlayerDelay(ctx context.Context, args *bench.Args, w io.Writer) error {
	targetsF := args.String("targets", "2,5,10,20", "target counts")
	sizesF := args.String("sizes", "1024,5120,10240", "entry sizes in bytes")
	rate := args.Int("rate", 1000, "entries per second")
	dur := args.Duration("duration", 5*time.Second, "measured time per system and cell")
	warm := args.Duration("warmup", time.Second, "warm-up per system and cell (not measured)")
	systems := args.String("systems", "bare,barekafka,kafka,player", "systems to run (bare, barekafka, kafka, player)")
	rounds := args.Int("rounds", 1, "rounds per cell: each runs every system once (samples pooled, per-round p99 printed)")
	keys := args.Int("keys", 1000, "distinct keys (bounds the player's materialized copy)")
	bs, err := args.Parse()
	if err != nil {
		return err
	}
	targets, err := bench.Ints(*targetsF)
	if err != nil {
		return err
	}
	sizes, err := bench.Ints(*sizesF)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "player-delay: %d entries/s, %s measured after %s warm-up per system, %d round(s) per cell, %s (loopback gRPC)\n",
		*rate, *dur, *warm, *rounds, bench.Layout())
	fmt.Fprintf(w, "paper (8 vCPU, LogStore): LogPlayer dispatch→apply avg and p50 < 0.32 ms, p99 < 0.78 ms at 20 targets x 10 KB\n\n")
	const rowf = "%7v %6v  %-22s %-18s %8v %8v %8v %8v %7v%s\n"
	fmt.Fprintf(w, rowf, "targets", "size", "system", "span", "avg ms", "p50 ms", "p99 ms", "max ms", "n", "")
	row := func(n, size int, system, span string, s bench.Summary, extra string) {
		fmt.Fprintf(w, rowf, n, size, system, span, bench.MS(s.Avg), bench.MS(s.P50), bench.MS(s.P99), bench.MS(s.Max), s.N, extra)
	}
	var verdicts []string
	for _, size := range sizes {
		for _, n := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c := cell{targets: n, size: size, rate: *rate, keys: *keys,
				total: int(float64(*rate) * (*dur + *warm).Seconds()), warm: int(float64(*rate) * warm.Seconds())}
			// Each round runs the systems one after the other; samples are pooled over the
			// rounds (so that every system meets the machine's quiet and busy moments) and the
			// per-round p99s are printed as the spread.
			var bare, bareK, kafkaSent, kafkaAcked, playerSent, playerAcked, playerDisp bench.Pool
			var cells []playerCell
			for round := 0; round < *rounds; round++ {
				if bench.HasSystem(*systems, "bare") {
					st, err := runBareCell(ctx, c)
					if err != nil {
						return err
					}
					bare.Add(st)
				}
				if bench.HasSystem(*systems, "barekafka") {
					st, err := runBareKafkaCell(ctx, bs, c)
					if err != nil {
						return err
					}
					bareK.Add(st)
				}
				if bench.HasSystem(*systems, "kafka") {
					st, ak, err := runKafkaCell(ctx, bs, c)
					if err != nil {
						return err
					}
					kafkaSent.Add(st)
					kafkaAcked.Add(ak)
				}
				if bench.HasSystem(*systems, "player") {
					r, err := runPlayerCell(ctx, bs, c)
					if err != nil {
						return err
					}
					playerSent.Add(r.stamped)
					playerAcked.Add(r.acked)
					playerDisp.Add(r.dispatched)
					cells = append(cells, r)
				}
			}
			if s := bare.Summary(); s.N > 0 {
				row(n, size, "bare gRPC fan-out", "dispatch→applied", s, bare.Spread())
			}
			if s := bareK.Summary(); s.N > 0 {
				row(n, size, "bare fan-out from Kafka", "dispatch→applied", s, bareK.Spread())
			}
			if s := kafkaSent.Summary(); s.N > 0 {
				row(n, size, "sarama consumers", "produce→applied", s, kafkaSent.Spread())
				row(n, size, "sarama consumers", "kafka-ack→applied", kafkaAcked.Summary(), "")
			}
			if s := playerSent.Summary(); s.N > 0 {
				row(n, size, "player", "produce→applied", s, "")
				row(n, size, "player", "kafka-ack→applied", playerAcked.Summary(), "")
				row(n, size, "player", "dispatch→applied", playerDisp.Summary(), playerDisp.Spread())
				for _, r := range cells {
					h := r.hist
					fmt.Fprintf(w, rowf, n, size, "player (own histogram)", "dispatch→written", bench.MS(h.Mean), bench.MS(h.P50), bench.MS(h.P99), "-", h.Count, "")
					fmt.Fprintf(w, "%7v %6v  %-22s %s\n", n, size, "budget", r.budget)
					fmt.Fprintf(w, "%7v %6v  %-22s %s\n", n, size, "delivery checker", r.verdict)
				}
			}
			verdicts = append(verdicts, delayVerdicts(n, size, bare.Summary(), bareK.Summary(), kafkaSent.Summary(), playerSent.Summary(), playerDisp.Summary())...)
		}
	}
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintln(w, v)
	}
	return nil
}

// delayVerdicts compares the player's spans with the same-run baselines that have samples.
func delayVerdicts(n, size int, bare, bareK, kafkaSent, playerSent, playerDisp bench.Summary) []string {
	var out []string
	if bare.N > 0 && playerDisp.N > 0 {
		out = append(out, fmt.Sprintf("%2d x %5d B: player dispatch→applied / bare dispatch→applied: p50 %.2fx (goal <= 1.3x), p99 %.2fx (goal <= 1.5x)",
			n, size, bench.Ratio(playerDisp.P50, bare.P50), bench.Ratio(playerDisp.P99, bare.P99)))
	}
	if bareK.N > 0 && playerDisp.N > 0 {
		out = append(out, fmt.Sprintf("%2d x %5d B: player dispatch→applied / bare fan-out from Kafka: p50 %.2fx, p99 %.2fx (same process layout and input bursts)",
			n, size, bench.Ratio(playerDisp.P50, bareK.P50), bench.Ratio(playerDisp.P99, bareK.P99)))
	}
	// The goal's spans: the player's delivery delay (dispatch → applied) against the
	// direct consumers' produce → applied; and, stricter, both produce → applied.
	if kafkaSent.N > 0 && playerDisp.N > 0 {
		out = append(out, fmt.Sprintf("%2d x %5d B: player dispatch→applied p99 / sarama consumers' produce→applied p99: %.2fx (goal <= 0.5x)",
			n, size, bench.Ratio(playerDisp.P99, kafkaSent.P99)))
	}
	if kafkaSent.N > 0 && playerSent.N > 0 {
		out = append(out, fmt.Sprintf("%2d x %5d B: player produce→applied p99 / sarama consumers' produce→applied p99: %.2fx (end to end, both through the broker)",
			n, size, bench.Ratio(playerSent.P99, kafkaSent.P99)))
	}
	return out
}

// runBareCell fans the cell's entries out at its rate through a bare gRPC fan-out to its
// receivers and returns dispatch → applied after the warm-up.
func runBareCell(ctx context.Context, c cell) ([]time.Duration, error) {
	b, err := bench.StartBare(c.targets, c.targets, nil)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	bench.Pace(ctx, c.rate, func(i int) bool {
		if i >= c.total {
			return false
		}
		b.Publish(bench.EncodeBatch(bench.BareEntry(i, c.size, c.keys)))
		return true
	})
	if !bench.WaitFor(30*time.Second, func() bool { return bench.AllHave(b.Recv, c.total) }) {
		return nil, fmt.Errorf("bare fan-out: receivers did not get all %d entries", c.total)
	}
	st, _, _ := bench.Latencies(b.Recv, int64(c.warm), nil)
	return st, nil
}

// runBareKafkaCell is the bare fan-out fed from Kafka (Bare.FeedFromKafka) with the same
// production as the player's cell to a fresh topic. It returns dispatch (the consumer
// delivered the record) → applied.
func runBareKafkaCell(ctx context.Context, brokers []string, c cell) ([]time.Duration, error) {
	topic, drop, err := bench.NewTopic(brokers, "bench_barek")
	if err != nil {
		return nil, err
	}
	defer drop()
	b, err := bench.StartBare(c.targets, c.targets, nil)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	stop, err := b.FeedFromKafka(brokers, topic)
	if err != nil {
		return nil, err
	}
	p, err := bench.NewProducer(brokers, topic)
	if err != nil {
		stop()
		return nil, err
	}
	perr := p.SendPaced(ctx, c.rate, c.total, "v", c.keys, c.size)
	ok := bench.WaitFor(60*time.Second, func() bool { return bench.AllHave(b.Recv, c.total) })
	dispatched := stop()
	if perr != nil {
		return nil, perr
	}
	if !ok {
		return nil, fmt.Errorf("bare fan-out from Kafka: receivers did not get all %d entries", c.total)
	}
	return bench.DispatchSpans(b.Recv, dispatched, int64(c.warm)), nil
}

// runKafkaCell produces the cell's entries at its rate to a fresh topic read by one sarama
// consumer per target. It returns produce→applied and kafka-ack→applied.
func runKafkaCell(ctx context.Context, brokers []string, c cell) (stamped, acked []time.Duration, err error) {
	topic, drop, err := bench.NewTopic(brokers, "bench_kafka")
	if err != nil {
		return nil, nil, err
	}
	defer drop()
	cs, err := bench.StartConsumers(brokers, topic, c.targets, 0)
	if err != nil {
		return nil, nil, err
	}
	defer cs.Close()
	p, err := bench.NewProducer(brokers, topic)
	if err != nil {
		return nil, nil, err
	}
	if err := p.SendPaced(ctx, c.rate, c.total, "v", c.keys, c.size); err != nil {
		return nil, nil, err
	}
	if !bench.WaitFor(60*time.Second, func() bool { return bench.AllHave(cs.Recv, c.total) }) {
		return nil, nil, fmt.Errorf("sarama consumers did not get all %d entries", c.total)
	}
	st, ak, _ := bench.Latencies(cs.Recv, int64(c.warm), p.Acks)
	return st, ak, nil
}

// playerCell is what runPlayerCell measured.
type playerCell struct {
	stamped, acked, dispatched []time.Duration // produce→, kafka-ack→, dispatch→applied
	hist                       bench.Histogram // the player's own dispatch→written
	verdict                    string          // the delivery checker's
	budget                     string          // the targets' budget overflows and recoveries
}

// runPlayerCell produces the cell's entries at its rate to a fresh topic served by an
// in-process player to the cell's targets.
func runPlayerCell(ctx context.Context, brokers []string, c cell) (playerCell, error) {
	var out playerCell
	topic, drop, err := bench.NewTopic(brokers, "bench_player")
	if err != nil {
		return out, err
	}
	defer drop()
	pr, err := bench.StartPlayer(brokers, topic, nil)
	if err != nil {
		return out, err
	}
	defer pr.Close()
	if err := pr.Connect(bench.Targets{N: c.targets, Conns: c.targets}); err != nil {
		return out, err
	}
	p, err := bench.NewProducer(brokers, topic)
	if err != nil {
		return out, err
	}
	if err := p.SendPaced(ctx, c.rate, c.total, "v", c.keys, c.size); err != nil {
		return out, err
	}
	if !bench.WaitFor(60*time.Second, func() bool { return bench.AllHave(pr.Recv, c.total) }) {
		return out, fmt.Errorf("player targets did not get all %d entries", c.total)
	}
	out.stamped, out.acked, _ = bench.Latencies(pr.Recv, int64(c.warm), p.Acks)
	out.dispatched = pr.DispatchLatencies(int64(c.warm))
	out.hist = pr.Histogram("statecast_player_delivery_delay_seconds")
	ov, rc := pr.Recoveries()
	out.budget = fmt.Sprintf("overflows %d, recoveries %d (all targets, whole cell); %.2f entries per batch frame", ov, rc, bench.PerFrame(pr.Recv))
	out.verdict = bench.CheckVerdict(pr.Check())
	return out, nil
}
