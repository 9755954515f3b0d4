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

// runPlayerThroughput measures fan-out throughput: M entries to T targets, for
//
//   - raw: a raw gRPC fan-out on loopback, batches of the player's size encoded once and
//     written to every stream as fast as the streams take them;
//   - player: the targets subscribed at the head of a fresh topic, the M entries produced
//     as fast as the (idempotent, acks=all, lz4) producer goes; throughput = M per target
//     over the time from the first produce to the last entry applied by the last target.
//     The producer's own rate is printed beside: if the player's time is close to it, the
//     number is producer-bound and only a lower bound of the player's capacity.
func runPlayerThroughput(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("player-throughput", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	n := fs.Int("targets", 20, "targets")
	m := fs.Int("entries", 30000, "entries")
	size := fs.Int("size", 1024, "entry size in bytes")
	batch := fs.Int("batch", 512, "raw fan-out batch size (the player's default max_batch_entries)")
	systems := fs.String("systems", "raw,player", "systems to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bs, err := splitBrokers(*brokers)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "player-throughput: %d entries of %d B to %d targets, GOMAXPROCS=%d, receivers in this process (loopback gRPC)\n",
		*m, *size, *n, runtime.GOMAXPROCS(0))
	const rowf = "%-34s %10v %14v %14v %10v\n"
	fmt.Fprintf(w, rowf, "system", "seconds", "entries/s/tgt", "deliveries/s", "MB/s")
	line := func(name string, d time.Duration) float64 {
		per := float64(*m) / d.Seconds()
		fmt.Fprintf(w, rowf, name, fmt.Sprintf("%.2f", d.Seconds()), fmt.Sprintf("%.0f", per),
			fmt.Sprintf("%.0f", per*float64(*n)), fmt.Sprintf("%.1f", per*float64(*n)*float64(*size)/1e6))
		return per
	}
	var raw, pl float64
	if strings.Contains(*systems, "raw") {
		b, err := startBare(*n, *n, nil)
		if err != nil {
			return err
		}
		// Pre-encode the batches (the player encodes each entry once, too).
		var msgs []rawMsg
		for i := 0; i < *m; i += *batch {
			var es []*statecastv1.Entry
			for j := i; j < min(i+*batch, *m); j++ {
				es = append(es, bareEntry(j, *size, 1000))
			}
			msgs = append(msgs, encodeOnce(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}}))
		}
		start := time.Now()
		for _, msg := range msgs {
			b.f.publish(msg)
		}
		ok := waitFor(5*time.Minute, func() bool { return allHave(b.recv, *m) })
		d := time.Since(start)
		b.close()
		if !ok {
			return fmt.Errorf("raw fan-out: receivers did not get all entries")
		}
		raw = line("raw gRPC fan-out (encoded once)", d)
	}
	if strings.Contains(*systems, "player") {
		topic, drop, err := newTopic(bs, "bench_tput")
		if err != nil {
			return err
		}
		defer drop()
		pr, err := startPlayer(bs, topic, nil)
		if err != nil {
			return err
		}
		defer pr.close()
		if err := pr.connect(*n, *n, nil, nil); err != nil {
			return err
		}
		p, err := newProducer(bs, topic)
		if err != nil {
			return err
		}
		start := time.Now()
		for i := range *m {
			p.send("v", i%1000, *size)
		}
		if err := p.close(); err != nil {
			return err
		}
		prod := time.Since(start)
		ok := waitFor(5*time.Minute, func() bool { return allHave(pr.recv, *m) })
		d := time.Since(start)
		if !ok {
			return fmt.Errorf("player: targets did not get all entries")
		}
		fmt.Fprintf(w, "%-34s %10.2f %14.0f %14s %10.1f\n", "(producer alone, all acked)", prod.Seconds(), float64(*m)/prod.Seconds(), "-",
			float64(*m)*float64(*size)/prod.Seconds()/1e6)
		pl = line("player (produce → all applied)", d)
		verdict := "ok (ordered, unique, reliable, resumable)"
		if err := pr.check(); err != nil {
			verdict = "VIOLATIONS: " + strings.ReplaceAll(err.Error(), "\n", " | ")
		}
		fmt.Fprintf(w, "delivery checker: %s\n", verdict)
	}
	if raw > 0 && pl > 0 {
		fmt.Fprintf(w, "\nplayer / raw = %.0f%% (goal >= 60%%)\n", 100*pl/raw)
	}
	return nil
}
