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
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprof := fs.String("memprofile", "", "write an allocation profile (alloc_space) at the end of the run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := profiles(profileFiles{cpu: *cpuprof, mem: *memprof})
	if err != nil {
		return err
	}
	defer stopProf()
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
	var raw, pl, plE2E float64
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
		// (a) end to end: the producer writes while the player fans out.
		d, prod, verdict, err := playerTput(bs, *n, *m, *size, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-34s %10.2f %14.0f %14s %10.1f\n", "(producer alone, all acked)", prod.Seconds(), float64(*m)/prod.Seconds(), "-",
			float64(*m)*float64(*size)/prod.Seconds()/1e6)
		plE2E = line("player (produce → all applied)", d)
		fmt.Fprintf(w, "delivery checker: %s\n", verdict)
		// (b) the log already written: the main fetcher is held at its first dispatch
		// until the producer is done, then reads the records from Kafka and fans them out.
		d, _, verdict, err = playerTput(bs, *n, *m, *size, true)
		if err != nil {
			return err
		}
		pl = line("player (log in Kafka → all applied)", d)
		fmt.Fprintf(w, "delivery checker: %s\n", verdict)
	}
	if raw > 0 && pl > 0 {
		fmt.Fprintf(w, "\nplayer (log in Kafka) / raw = %.0f%% (goal >= 60%%)\n", 100*pl/raw)
		fmt.Fprintf(w, "player (produce → applied, producer and broker on the same cores) / raw = %.0f%%\n", 100*plE2E/raw)
	}
	return nil
}

// playerTput runs one player throughput measurement: n targets subscribed at the head of a
// fresh topic, m entries of size bytes produced as fast as the producer goes. held: the
// player's main fetcher waits at its first dispatch until every record is acknowledged by
// Kafka, and the time runs from its release; otherwise from the first produce. It returns
// the time to the last entry applied by the last target, the producer's own time and the
// delivery checker's verdict.
func playerTput(bs []string, n, m, size int, held bool) (d, prod time.Duration, verdict string, err error) {
	topic, drop, err := newTopic(bs, "bench_tput")
	if err != nil {
		return 0, 0, "", err
	}
	defer drop()
	pr, err := startPlayer(bs, topic, nil)
	if err != nil {
		return 0, 0, "", err
	}
	defer pr.close()
	if err := pr.connect(n, n, nil, nil); err != nil {
		return 0, 0, "", err
	}
	p, err := newProducer(bs, topic)
	if err != nil {
		return 0, 0, "", err
	}
	var release func()
	if held {
		release = pr.holdDispatch()
	}
	start := time.Now()
	for i := range m {
		p.send("v", i%1000, size)
	}
	if err := p.close(); err != nil {
		return 0, 0, "", err
	}
	prod = time.Since(start)
	if held {
		start = time.Now()
		release()
	}
	if !waitFor(5*time.Minute, func() bool { return allHave(pr.recv, m) }) {
		return 0, 0, "", fmt.Errorf("player: targets did not get all entries")
	}
	d = time.Since(start)
	verdict = "ok (ordered, unique, reliable, resumable)"
	if err := pr.check(); err != nil {
		verdict = "VIOLATIONS: " + strings.ReplaceAll(err.Error(), "\n", " | ")
	}
	return d, prod, verdict, nil
}
