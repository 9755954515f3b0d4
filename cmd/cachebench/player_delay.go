package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

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
//     produce → applied, Kafka-ack → applied, and the player's own dispatch → written-to-
//     the-stream histogram (statecast_player_delivery_delay_seconds).
//
// Every receiver runs in this process (goroutines over loopback TCP).
func runPlayerDelay(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("player-delay", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	targetsF := fs.String("targets", "2,5,10,20", "target counts")
	sizesF := fs.String("sizes", "1024,5120,10240", "entry sizes in bytes")
	rate := fs.Int("rate", 1000, "entries per second")
	dur := fs.Duration("duration", 5*time.Second, "measured time per system and cell")
	warm := fs.Duration("warmup", time.Second, "warm-up per system and cell (not measured)")
	systems := fs.String("systems", "bare,kafka,player", "systems to run")
	keys := fs.Int("keys", 1000, "distinct keys (bounds the player's materialized copy)")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	mutexprof := fs.String("mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := profiles(*cpuprof, *mutexprof)
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
	fmt.Fprintf(w, "player-delay: %d entries/s, %s measured after %s warm-up per cell, GOMAXPROCS=%d, receivers in this process (loopback gRPC)\n",
		*rate, *dur, *warm, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "paper (8 vCPU, LogStore): LogPlayer dispatch→apply avg and p50 < 0.32 ms, p99 < 0.78 ms at 20 targets x 10 KB\n\n")
	const rowf = "%7v %6v  %-22s %-18s %8v %8v %8v %8v %7v\n"
	fmt.Fprintf(w, rowf, "targets", "size", "system", "span", "avg ms", "p50 ms", "p99 ms", "max ms", "n")
	row := func(n, size int, system, span string, s summary) {
		fmt.Fprintf(w, rowf, n, size, system, span, ms(s.avg), ms(s.p50), ms(s.p99), ms(s.max), s.n)
	}
	total := int(float64(*rate) * (*dur + *warm).Seconds())
	warmN := int(float64(*rate) * warm.Seconds())
	var verdicts []string
	for _, size := range sizes {
		for _, n := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var bare, kafkaSent, playerAck, playerSent summary
			if strings.Contains(*systems, "bare") {
				b, err := startBare(n, n, nil)
				if err != nil {
					return err
				}
				pace(ctx, *rate, func(i int) bool {
					if i >= total {
						return false
					}
					b.f.publish(encodeOnce(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{
						Batch: &statecastv1.Batch{Entries: []*statecastv1.Entry{bareEntry(i, size, *keys)}}}}))
					return true
				})
				if !waitFor(30*time.Second, func() bool { return allHave(b.recv, total) }) {
					b.close()
					return fmt.Errorf("bare fan-out: receivers did not get all %d entries", total)
				}
				st, _, _ := latencies(b.recv, int64(warmN), nil)
				b.close()
				bare = summarize(st)
				row(n, size, "bare gRPC fan-out", "dispatch→applied", bare)
			}
			if strings.Contains(*systems, "kafka") {
				s, _, err := runKafkaCell(ctx, bs, n, size, *rate, total, warmN, *keys)
				if err != nil {
					return err
				}
				kafkaSent = s[0]
				row(n, size, "sarama consumers", "produce→applied", s[0])
				row(n, size, "sarama consumers", "kafka-ack→applied", s[1])
			}
			if strings.Contains(*systems, "player") {
				s, h, chk, err := runPlayerCell(ctx, bs, n, size, *rate, total, warmN, *keys)
				if err != nil {
					return err
				}
				playerSent, playerAck = s[0], s[1]
				row(n, size, "player", "produce→applied", s[0])
				row(n, size, "player", "kafka-ack→applied", s[1])
				fmt.Fprintf(w, rowf, n, size, "player (own histogram)", "dispatch→written", ms(h.mean), ms(h.p50), ms(h.p99), "-", h.count)
				fmt.Fprintf(w, "%7v %6v  %-22s %s\n", n, size, "delivery checker", chk)
			}
			if bare.n > 0 && playerAck.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player kafka-ack→applied / bare dispatch→applied: p50 %.2fx (goal <= 1.3x), p99 %.2fx (goal <= 1.5x)",
					n, size, ratio(playerAck.p50, bare.p50), ratio(playerAck.p99, bare.p99)))
			}
			if kafkaSent.n > 0 && playerSent.n > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%2d x %5d B: player produce→applied p99 / sarama consumers' p99: %.2fx (goal <= 0.5x)",
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

// runKafkaCell produces total entries at rate to a fresh topic read by n sarama consumers.
// It returns [produce→applied, kafka-ack→applied].
func runKafkaCell(ctx context.Context, brokers []string, n, size, rate, total, warmN, keys int) ([2]summary, int, error) {
	var out [2]summary
	topic, drop, err := newTopic(brokers, "bench_kafka")
	if err != nil {
		return out, 0, err
	}
	defer drop()
	c, err := startConsumers(brokers, topic, n, 0)
	if err != nil {
		return out, 0, err
	}
	defer c.close()
	p, err := newProducer(brokers, topic)
	if err != nil {
		return out, 0, err
	}
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.send("v", i%keys, size)
		return true
	})
	if err := p.close(); err != nil {
		return out, 0, err
	}
	if !waitFor(60*time.Second, func() bool { return allHave(c.got, total) }) {
		return out, 0, fmt.Errorf("sarama consumers did not get all %d entries", total)
	}
	st, ak, miss := latencies(c.got, int64(warmN), p.acks)
	out[0], out[1] = summarize(st), summarize(ak)
	return out, miss, nil
}

// runPlayerCell produces total entries at rate to a fresh topic served by an in-process
// player to n targets. It returns [produce→applied, kafka-ack→applied], the player's own
// histogram and the delivery checker's verdict.
func runPlayerCell(ctx context.Context, brokers []string, n, size, rate, total, warmN, keys int) ([2]summary, histogram, string, error) {
	var out [2]summary
	topic, drop, err := newTopic(brokers, "bench_player")
	if err != nil {
		return out, histogram{}, "", err
	}
	defer drop()
	pr, err := startPlayer(brokers, topic, nil)
	if err != nil {
		return out, histogram{}, "", err
	}
	defer pr.close()
	if err := pr.connect(n, n, nil, nil); err != nil {
		return out, histogram{}, "", err
	}
	p, err := newProducer(brokers, topic)
	if err != nil {
		return out, histogram{}, "", err
	}
	pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.send("v", i%keys, size)
		return true
	})
	if err := p.close(); err != nil {
		return out, histogram{}, "", err
	}
	if !waitFor(60*time.Second, func() bool { return allHave(pr.recv, total) }) {
		return out, histogram{}, "", fmt.Errorf("player targets did not get all %d entries", total)
	}
	st, ak, _ := latencies(pr.recv, int64(warmN), p.acks)
	out[0], out[1] = summarize(st), summarize(ak)
	h := pr.histogram("statecast_player_delivery_delay_seconds")
	verdict := "ok (ordered, unique, reliable, resumable)"
	if err := pr.check(); err != nil {
		verdict = "VIOLATIONS: " + strings.ReplaceAll(err.Error(), "\n", " | ")
	}
	return out, h, verdict, nil
}
