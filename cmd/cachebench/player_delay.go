package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// runPlayerDelay measures the delivery delay for each (targets, entry size) cell at a fixed
// rate, for three systems run one after the other in this process:
//
//   - bare: a bare gRPC fan-out (each entry a batch of one, encoded once, one goroutine per
//     stream, no queues/terms/acks logic), entries generated in process, stamped at dispatch;
//     delay = dispatch → applied at the receiver;
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
func runPlayerDelay(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("player-delay", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	targetsF := fs.String("targets", "2,5,10,20", "target counts")
	sizesF := fs.String("sizes", "1024,5120,10240", "entry sizes in bytes")
	rate := fs.Int("rate", 1000, "entries per second")
	dur := fs.Duration("duration", 5*time.Second, "measured time per system and cell")
	warm := fs.Duration("warmup", time.Second, "warm-up per system and cell (not measured)")
	systems := fs.String("systems", "bare,barekafka,kafka,player", "systems to run (bare, barekafka, kafka, player)")
	rounds := fs.Int("rounds", 1, "rounds per cell: each runs every system once (samples pooled, per-round p99 printed)")
	keys := fs.Int("keys", 1000, "distinct keys (bounds the player's materialized copy)")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	mutexprof := fs.String("mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	blockprof := fs.String("blockprofile", "", "write a blocking profile of the whole run to this file")
	memprof := fs.String("memprofile", "", "write an allocation profile (alloc_space) at the end of the run to this file")
	tracef := fs.String("trace", "", "write an execution trace (go tool trace) of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := profiles(profileFiles{cpu: *cpuprof, mutex: *mutexprof, block: *blockprof, mem: *memprof, trace: *tracef})
	if err != nil {
		return err
	}
	defer stopProf()
	bs, err := splitBrokers(*brokers)
	if err != nil {
		return err
	}
	targets, err := ints(*targetsF)
	if err != nil {
		return err
	}
	sizes, err := ints(*sizesF)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "player-delay: %d entries/s, %s measured after %s warm-up per system, %d round(s) per cell, GOMAXPROCS=%d, receivers in this process (loopback gRPC)\n",
		*rate, *dur, *warm, *rounds, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "paper (8 vCPU, LogStore): LogPlayer dispatch→apply avg and p50 < 0.32 ms, p99 < 0.78 ms at 20 targets x 10 KB\n\n")
	const rowf = "%7v %6v  %-22s %-18s %8v %8v %8v %8v %7v%s\n"
	fmt.Fprintf(w, rowf, "targets", "size", "system", "span", "avg ms", "p50 ms", "p99 ms", "max ms", "n", "")
	row := func(n, size int, system, span string, s summary, extra string) {
		fmt.Fprintf(w, rowf, n, size, system, span, ms(s.avg), ms(s.p50), ms(s.p99), ms(s.max), s.n, extra)
	}
	total := int(float64(*rate) * (*dur + *warm).Seconds())
	warmN := int(float64(*rate) * warm.Seconds())
	var verdicts []string
	for _, size := range sizes {
		for _, n := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Each round runs the systems one after the other; samples are pooled over the
			// rounds (so that every system meets the machine's quiet and busy moments) and the
			// per-round p99s are printed as the spread.
			var bareS, bareKS, kafkaS, kafkaA, playerS, playerA, playerD []time.Duration
			var bareR, bareKR, kafkaR, playerR []string
			var hists []histogram
			var chks, recs []string
			for round := 0; round < *rounds; round++ {
				if strings.Contains(","+*systems+",", ",bare,") {
					st, err := runBareCell(ctx, n, size, *rate, total, warmN, *keys)
					if err != nil {
						return err
					}
					bareS = append(bareS, st...)
					bareR = append(bareR, ms(summarize(st).p99))
				}
				if strings.Contains(*systems, "barekafka") {
					st, err := runBareKafkaCell(ctx, bs, n, size, *rate, total, warmN, *keys)
					if err != nil {
						return err
					}
					bareKS = append(bareKS, st...)
					bareKR = append(bareKR, ms(summarize(st).p99))
				}
				if strings.Contains(","+*systems+",", ",kafka,") {
					st, ak, err := runKafkaCell(ctx, bs, n, size, *rate, total, warmN, *keys)
					if err != nil {
						return err
					}
					kafkaS, kafkaA = append(kafkaS, st...), append(kafkaA, ak...)
					kafkaR = append(kafkaR, ms(summarize(st).p99))
				}
				if strings.Contains(*systems, "player") {
					s, h, chk, rec, err := runPlayerCell(ctx, bs, n, size, *rate, total, warmN, *keys)
					if err != nil {
						return err
					}
					playerS, playerA, playerD = append(playerS, s[0]...), append(playerA, s[1]...), append(playerD, s[2]...)
					playerR = append(playerR, ms(summarize(s[2]).p99))
					hists, chks, recs = append(hists, h), append(chks, chk), append(recs, rec)
				}
			}
			bare, kafkaSent, playerSent, playerDisp := summarize(bareS), summarize(kafkaS), summarize(playerS), summarize(playerD)
			spread := func(r []string) string {
				if len(r) < 2 {
					return ""
				}
				return "   p99 per round: " + strings.Join(r, " / ")
			}
			if bare.n > 0 {
				row(n, size, "bare gRPC fan-out", "dispatch→applied", bare, spread(bareR))
			}
			if bk := summarize(bareKS); bk.n > 0 {
				row(n, size, "bare fan-out from Kafka", "dispatch→applied", bk, spread(bareKR))
			}
			if kafkaSent.n > 0 {
				row(n, size, "sarama consumers", "produce→applied", kafkaSent, spread(kafkaR))
				row(n, size, "sarama consumers", "kafka-ack→applied", summarize(kafkaA), "")
			}
			if playerSent.n > 0 {
				row(n, size, "player", "produce→applied", playerSent, "")
				row(n, size, "player", "kafka-ack→applied", summarize(playerA), "")
				row(n, size, "player", "dispatch→applied", playerDisp, spread(playerR))
				for i, h := range hists {
					fmt.Fprintf(w, rowf, n, size, "player (own histogram)", "dispatch→written", ms(h.mean), ms(h.p50), ms(h.p99), "-", h.count, "")
					fmt.Fprintf(w, "%7v %6v  %-22s %s\n", n, size, "budget", recs[i])
					fmt.Fprintf(w, "%7v %6v  %-22s %s\n", n, size, "delivery checker", chks[i])
				}
			}
			if bare.n > 0 && playerDisp.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player dispatch→applied / bare dispatch→applied: p50 %.2fx (goal <= 1.3x), p99 %.2fx (goal <= 1.5x)",
					n, size, ratio(playerDisp.p50, bare.p50), ratio(playerDisp.p99, bare.p99)))
			}
			if bk := summarize(bareKS); bk.n > 0 && playerDisp.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player dispatch→applied / bare fan-out from Kafka: p50 %.2fx, p99 %.2fx (same process layout and input bursts)",
					n, size, ratio(playerDisp.p50, bk.p50), ratio(playerDisp.p99, bk.p99)))
			}
			// The spans: the player's delivery delay (dispatch → applied) against the
			// direct consumers' produce → applied; and, stricter, both produce → applied.
			if kafkaSent.n > 0 && playerDisp.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player dispatch→applied p99 / sarama consumers' produce→applied p99: %.2fx (goal <= 0.5x)",
					n, size, ratio(playerDisp.p99, kafkaSent.p99)))
			}
			if kafkaSent.n > 0 && playerSent.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player produce→applied p99 / sarama consumers' produce→applied p99: %.2fx (end to end, both through the broker)",
					n, size, ratio(playerSent.p99, kafkaSent.p99)))
			}
		}
	}
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintln(w, v)
	}
	return nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// runBareCell fans total entries out at rate through a bare gRPC fan-out to n receivers
// and returns dispatch → applied after the warm-up.
func runBareCell(ctx context.Context, n, size, rate, total, warmN, keys int) ([]time.Duration, error) {
	b, err := startBare(n, n, nil)
	if err != nil {
		return nil, err
	}
	defer b.close()
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		b.f.publish(encodeOnce(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{
			Batch: &statecastv1.Batch{Entries: []*statecastv1.Entry{bareEntry(i, size, keys)}}}}))
		return true
	})
	if !waitFor(30*time.Second, func() bool { return allHave(b.recv, total) }) {
		return nil, fmt.Errorf("bare fan-out: receivers did not get all %d entries", total)
	}
	st, _, _ := latencies(b.recv, int64(warmN), nil)
	return st, nil
}

// runBareKafkaCell is the bare fan-out fed from Kafka: the same production as the player's
// cell to a fresh topic, one sarama consumer configured like the player's main fetcher,
// and each record, as it arrives, encoded once as a one-entry batch and handed to every
// stream (no queues, batching, terms or acks logic). The process then holds what the
// player's cell holds (producer, fetcher, fan-out, receivers) and the entries arrive in
// the same bursts. It returns dispatch (consumer delivered the record) → applied.
func runBareKafkaCell(ctx context.Context, brokers []string, n, size, rate, total, warmN, keys int) ([]time.Duration, error) {
	topic, drop, err := newTopic(brokers, "bench_barek")
	if err != nil {
		return nil, err
	}
	defer drop()
	b, err := startBare(n, n, nil)
	if err != nil {
		return nil, err
	}
	defer b.close()
	cfg := kafkaconn.NewConfig("cachebench-bare-fetcher")
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond // as the player's fetchers
	cfg.Consumer.Fetch.Default = 4 << 20
	cl, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	co, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		return nil, err
	}
	pc, err := co.ConsumePartition(topic, 0, 0)
	if err != nil {
		return nil, err
	}
	dispatched := make(map[int64]int64, total)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range pc.Messages() {
			e := &statecastv1.Entry{Index: m.Offset, Key: m.Key, Value: m.Value, View: "v", Kind: statecastv1.Kind_KIND_ROW}
			msg := encodeOnce(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{
				Batch: &statecastv1.Batch{Entries: []*statecastv1.Entry{e}}}})
			dispatched[m.Offset] = time.Now().UnixNano()
			b.f.publish(msg)
		}
	}()
	p, err := newProducer(brokers, topic)
	if err != nil {
		pc.AsyncClose()
		<-done
		return nil, err
	}
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.send("v", i%keys, size)
		return true
	})
	perr := p.close()
	ok := waitFor(60*time.Second, func() bool { return allHave(b.recv, total) })
	pc.AsyncClose()
	<-done
	if perr != nil {
		return nil, perr
	}
	if !ok {
		return nil, fmt.Errorf("bare fan-out from Kafka: receivers did not get all %d entries", total)
	}
	return dispatchSpans(b.recv, dispatched, int64(warmN)), nil
}

// runKafkaCell produces total entries at rate to a fresh topic read by n sarama consumers.
// It returns produce→applied and kafka-ack→applied.
func runKafkaCell(ctx context.Context, brokers []string, n, size, rate, total, warmN, keys int) (stamped, acked []time.Duration, err error) {
	topic, drop, err := newTopic(brokers, "bench_kafka")
	if err != nil {
		return nil, nil, err
	}
	defer drop()
	c, err := startConsumers(brokers, topic, n, 0)
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	p, err := newProducer(brokers, topic)
	if err != nil {
		return nil, nil, err
	}
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.send("v", i%keys, size)
		return true
	})
	if err := p.close(); err != nil {
		return nil, nil, err
	}
	if !waitFor(60*time.Second, func() bool { return allHave(c.got, total) }) {
		return nil, nil, fmt.Errorf("sarama consumers did not get all %d entries", total)
	}
	st, ak, _ := latencies(c.got, int64(warmN), p.acks)
	return st, ak, nil
}

// runPlayerCell produces total entries at rate to a fresh topic served by an in-process
// player to n targets. It returns [produce→applied, kafka-ack→applied, dispatch→applied],
// the player's own histogram, the delivery checker's verdict and the targets' budget
// overflows / recoveries.
func runPlayerCell(ctx context.Context, brokers []string, n, size, rate, total, warmN, keys int) ([3][]time.Duration, histogram, string, string, error) {
	var out [3][]time.Duration
	topic, drop, err := newTopic(brokers, "bench_player")
	if err != nil {
		return out, histogram{}, "", "", err
	}
	defer drop()
	pr, err := startPlayer(brokers, topic, nil)
	if err != nil {
		return out, histogram{}, "", "", err
	}
	defer pr.close()
	if err := pr.connect(n, n, nil, nil); err != nil {
		return out, histogram{}, "", "", err
	}
	p, err := newProducer(brokers, topic)
	if err != nil {
		return out, histogram{}, "", "", err
	}
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.send("v", i%keys, size)
		return true
	})
	if err := p.close(); err != nil {
		return out, histogram{}, "", "", err
	}
	if !waitFor(60*time.Second, func() bool { return allHave(pr.recv, total) }) {
		return out, histogram{}, "", "", fmt.Errorf("player targets did not get all %d entries", total)
	}
	st, ak, _ := latencies(pr.recv, int64(warmN), p.acks)
	out[0], out[1], out[2] = st, ak, pr.dispatchLatencies(int64(warmN))
	h := pr.histogram("statecast_player_delivery_delay_seconds")
	ov, rc := pr.recoveries()
	rec := fmt.Sprintf("overflows %d, recoveries %d (all targets, whole cell); %.2f entries per batch frame", ov, rc, perFrame(pr.recv))
	verdict := "ok (ordered, unique, reliable, resumable)"
	if err := pr.check(); err != nil {
		verdict = "VIOLATIONS: " + strings.ReplaceAll(err.Error(), "\n", " | ")
	}
	return out, h, verdict, rec, nil
}
