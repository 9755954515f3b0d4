package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
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
func runPlayerThroughput(ctx context.Context, args *bench.Args, w io.Writer) error {
	n := args.Int("targets", 20, "targets")
	m := args.Int("entries", 30000, "entries")
	size := args.Int("size", 1024, "entry size in bytes")
	batch := args.Int("batch", 512, "raw fan-out batch size (the player's default max_batch_entries)")
	systems := args.String("systems", "raw,player", "systems to run (raw, player)")
	bs, err := args.Parse()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "player-throughput: %d entries of %d B to %d targets, %s (loopback gRPC)\n",
		*m, *size, *n, bench.Layout())
	const rowf = "%-34s %10v %14v %14v %10v\n"
	fmt.Fprintf(w, rowf, "system", "seconds", "entries/s/tgt", "deliveries/s", "MB/s")
	line := func(name string, d time.Duration) float64 {
		per := float64(*m) / d.Seconds()
		fmt.Fprintf(w, rowf, name, fmt.Sprintf("%.2f", d.Seconds()), fmt.Sprintf("%.0f", per),
			fmt.Sprintf("%.0f", per*float64(*n)), fmt.Sprintf("%.1f", per*float64(*n)*float64(*size)/1e6))
		return per
	}
	var raw, pl, plE2E float64
	if bench.HasSystem(*systems, "raw") {
		d, err := rawTput(*n, *m, *size, *batch)
		if err != nil {
			return err
		}
		raw = line("raw gRPC fan-out (encoded once)", d)
	}
	if bench.HasSystem(*systems, "player") {
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

// rawTput fans m entries of size bytes out to n receivers of a bare gRPC fan-out in
// batches of batch entries, and returns the time until the last receiver has them all.
func rawTput(n, m, size, batch int) (time.Duration, error) {
	b, err := bench.StartBare(n, n, nil)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	// Pre-encode the batches (the player encodes each entry once, too).
	var msgs []bench.RawMsg
	for i := 0; i < m; i += batch {
		var es []*statecastv1.Entry
		for j := i; j < min(i+batch, m); j++ {
			es = append(es, bench.BareEntry(j, size, 1000))
		}
		msgs = append(msgs, bench.EncodeBatch(es...))
	}
	start := time.Now()
	for _, msg := range msgs {
		b.Publish(msg)
	}
	ok := bench.WaitFor(5*time.Minute, func() bool { return bench.AllHave(b.Recv, m) })
	d := time.Since(start)
	if !ok {
		return 0, fmt.Errorf("raw fan-out: receivers did not get all entries")
	}
	return d, nil
}

// playerTput runs one player throughput measurement: n targets subscribed at the head of a
// fresh topic, m entries of size bytes produced as fast as the producer goes. held: the
// player's main fetcher waits at its first dispatch until every record is acknowledged by
// Kafka, and the time runs from its release; otherwise from the first produce. It returns
// the time to the last entry applied by the last target, the producer's own time and the
// delivery checker's verdict.
func playerTput(bs []string, n, m, size int, held bool) (d, prod time.Duration, verdict string, err error) {
	topic, drop, err := bench.NewTopic(bs, "bench_tput")
	if err != nil {
		return 0, 0, "", err
	}
	defer drop()
	pr, err := bench.StartPlayer(bs, topic, nil)
	if err != nil {
		return 0, 0, "", err
	}
	defer pr.Close()
	if err := pr.Connect(bench.Targets{N: n, Conns: n}); err != nil {
		return 0, 0, "", err
	}
	p, err := bench.NewProducer(bs, topic)
	if err != nil {
		return 0, 0, "", err
	}
	var release func()
	if held {
		release = pr.HoldDispatch()
		defer release() // on an early return, the fetcher must not stay held
	}
	start := time.Now()
	for i := range m {
		p.Send("v", i%1000, size)
	}
	if err := p.Close(); err != nil {
		return 0, 0, "", err
	}
	prod = time.Since(start)
	if held {
		start = time.Now()
		release()
	}
	if !bench.WaitFor(5*time.Minute, func() bool { return bench.AllHave(pr.Recv, m) }) {
		return 0, 0, "", fmt.Errorf("player: targets did not get all entries")
	}
	d = time.Since(start)
	return d, prod, bench.CheckVerdict(pr.Check()), nil
}
