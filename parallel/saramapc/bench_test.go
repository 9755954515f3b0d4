package saramapc

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

var (
	benchMessages  = flag.Int("commit.messages", 10000, "input records of BenchmarkCommitModes")
	benchKeys      = flag.Int("commit.keys", 100, "keys of the input records (key order)")
	benchSeed      = flag.Uint64("commit.seed", 1, "random seed for processing times and keys")
	benchWorkers   = flag.Int("commit.workers", 16, "engine workers (MaxConcurrency)")
	benchIntervals = flag.String("commit.intervals", "1s,100ms,10ms", "commit intervals, comma-separated")
)

// benchMode is one row of BenchmarkCommitModes.
type benchMode struct {
	name    string
	mode    CommitMode
	produce bool // async: the handler sends its output with an idempotent producer
}

var benchModes = []benchMode{
	{"async (baseline)", CommitAsync, false},
	{"async+producer", CommitAsync, true},
	{"sync", CommitSync, false},
	{"transactional", CommitTransactional, true},
}

// benchResult is what one consumer run measured, from the first handler call: until every
// record is complete (processed), and until the commit that covers the last one (committed).
type benchResult struct {
	processed, committed time.Duration
	commits, outputs     int64
}

// BenchmarkCommitModes measures the throughput of the commit modes on the seed table's shape
// (10,000 records, random 0-5 ms of work each, one partition, 16 workers, key order over
// 100 keys) against the default mode, in the same run: the plain consumer with asynchronous
// offset commits (no output), the same with every record's output sent by an idempotent
// producer from the handler (at-least-once consume-process-produce), synchronous commits,
// and the transactional mode (the outputs committed with the offsets, exactly once). Each
// mode runs with a fresh group over the same input topic; the time runs from the first
// handler call to the commit that covers the last record. The work is time.Sleep, the same
// in every mode: compare the ratios, not the times with the seed table's.
func BenchmarkCommitModes(b *testing.B) {
	brokers := testenv.KafkaBrokers(b)
	n, keys := *benchMessages, *benchKeys
	in := testenv.NewTopic(b, "pc_bench_in", nil)
	work, nominal := benchWorkload(b, brokers, in, n, keys, *benchSeed)
	for _, iv := range strings.Split(*benchIntervals, ",") {
		interval, err := time.ParseDuration(strings.TrimSpace(iv))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("interval="+interval.String(), func(b *testing.B) {
			out := testenv.NewTopic(b, "pc_bench_out", nil)
			var txnRatio float64
			for b.Loop() {
				fmt.Fprintf(os.Stdout, "\ncommit modes: %d records, random 0-5ms (seed %d), %d keys, key order, concurrency %d, commit interval %v; nominal lower bound %v\n",
					n, *benchSeed, keys, *benchWorkers, interval, nominal.Round(time.Millisecond))
				fmt.Fprintf(os.Stdout, "%-17s %10s %10s %7s %10s %7s %8s %10s %15s\n", "mode", "processed", "committed", "ratio",
					"records/s", "ratio", "commits", "commits/s", "records/commit")
				var base benchResult
				for _, m := range benchModes {
					r := runCommitMode(b, brokers, in, out, m, interval, work, int64(n))
					if base.committed == 0 {
						base = r
					}
					pr := float64(r.processed) / float64(base.processed)
					cr := float64(r.committed) / float64(base.committed)
					if m.mode == CommitTransactional {
						txnRatio = cr
					}
					secs := r.committed.Seconds()
					fmt.Fprintf(os.Stdout, "%-17s %10s %10s %7.3f %10.0f %7.3f %8d %10.1f %15.1f\n", m.name, r.processed.Round(time.Millisecond),
						r.committed.Round(time.Millisecond), pr, float64(n)/secs, cr, r.commits, float64(r.commits)/secs, float64(n)/float64(max(r.commits, 1)))
				}
			}
			b.ReportMetric(txnRatio, "txn/async-time")
		})
	}
}

// benchWorkload writes n records with random keys to topic and returns each offset's random
// 0-5 ms of work and the nominal lower bound: max(total / workers, heaviest key's total).
func benchWorkload(b *testing.B, brokers []string, topic string, n, keys int, seed uint64) (map[int64]time.Duration, time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 5))
	p, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("saramapc-bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	durs := make([]time.Duration, n)
	perKey := map[string]time.Duration{}
	var total, heaviest time.Duration
	for i := range msgs {
		durs[i] = time.Duration(rng.Int64N(int64(5*time.Millisecond) + 1))
		k := strconv.Itoa(rng.IntN(keys))
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(strconv.Itoa(i))}
		total += durs[i]
		perKey[k] += durs[i]
		heaviest = max(heaviest, perKey[k])
	}
	if err := p.SendMessages(msgs); err != nil {
		b.Fatal(err)
	}
	work := make(map[int64]time.Duration, n)
	for i, m := range msgs {
		work[m.Offset] = durs[i]
	}
	return work, max(total/time.Duration(*benchWorkers), heaviest)
}

func runCommitMode(b *testing.B, brokers []string, in, out string, m benchMode, interval time.Duration, work map[int64]time.Duration, n int64) benchResult {
	var first atomic.Int64 // unix nanos of the first handler call
	begin := func() {
		if first.Load() == 0 {
			first.CompareAndSwap(0, time.Now().UnixNano())
		}
	}
	output := func(msg Message) *sarama.ProducerMessage {
		return &sarama.ProducerMessage{Topic: out, Key: sarama.ByteEncoder(msg.Key), Value: sarama.ByteEncoder(msg.Value)}
	}
	var cfg Config
	switch {
	case m.mode == CommitTransactional:
		cfg = txnConfig(brokers, testenv.UniqueName("bench"), in, func(_ context.Context, r parallel.Record[Message], o *Producer) error {
			begin()
			time.Sleep(work[r.Offset])
			o.Send(output(r.Value))
			return nil
		})
	case m.produce:
		pc := kafkaconn.ProducerConfig("saramapc-bench")
		pc.Producer.Partitioner = sarama.NewHashPartitioner
		prod, err := sarama.NewSyncProducer(brokers, pc)
		if err != nil {
			b.Fatal(err)
		}
		defer prod.Close()
		cfg = testConfig(brokers, testenv.UniqueName("bench"), in, func(_ context.Context, r parallel.Record[Message]) error {
			begin()
			time.Sleep(work[r.Offset])
			_, _, err := prod.SendMessage(output(r.Value))
			return err
		})
	default:
		cfg = testConfig(brokers, testenv.UniqueName("bench"), in, func(_ context.Context, r parallel.Record[Message]) error {
			begin()
			time.Sleep(work[r.Offset])
			return nil
		})
	}
	cfg.Commit = m.mode
	cfg.CommitInterval = interval
	cfg.Engine.MaxConcurrency = *benchWorkers
	var completed, processedAt atomic.Int64
	cfg.Engine.Hooks.OnComplete = func(int64, int, bool) {
		if completed.Add(1) == n {
			processedAt.Store(time.Now().UnixNano())
		}
	}
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var end int64
	for off := range work {
		end = max(end, off+1)
	}
	done := make(chan struct{})
	var once sync.Once
	var last atomic.Int64
	c.onCommit = func(_ string, _ int32, p parallel.Progress, _ int, err error) {
		if err == nil && p.Watermark >= end {
			last.Store(time.Now().UnixNano())
			once.Do(func() { close(done) })
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("%s: Run: %v", m.name, err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s: no commit of the last record", m.name)
	}
	st := c.CommitStats()
	cancel()
	if err := <-errc; err != nil {
		b.Fatalf("%s: Run: %v", m.name, err)
	}
	if m.mode == CommitTransactional && st.Outputs != n {
		b.Fatalf("%s: %d outputs committed for %d records", m.name, st.Outputs, n)
	}
	return benchResult{
		processed: time.Duration(processedAt.Load() - first.Load()), committed: time.Duration(last.Load() - first.Load()),
		commits: st.Commits, outputs: st.Outputs,
	}
}
