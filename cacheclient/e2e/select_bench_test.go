package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// BenchmarkShardColdStart: a view of CC_BENCH_KEYS rows (default 1M) served by one
// player process, read by an unsharded client and by the client of shard 0 of
// CC_BENCH_SHARDS (default 16), alternating, each a cold start (snapshot bootstrap) to
// WaitReady. It reports the shard's share of the rows and of the view's memory, and its
// cold start over the unsharded one's in the same run (best of each).
func BenchmarkShardColdStart(b *testing.B) {
	keys := envInt("CC_BENCH_KEYS", 1_000_000)
	shards := uint32(envInt("CC_BENCH_SHARDS", 16))
	brokers := testenv.KafkaBrokers(b)
	topic := testenv.NewTopic(b, "cacheclient-shards", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("cacheclient-shards"))
	if err != nil {
		b.Fatal(err)
	}
	meta := record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	msgs := make([]*sarama.ProducerMessage, 0, 5000)
	for k := range keys {
		v := fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d"}`, k, k%50, k)
		msgs = append(msgs, recordsarama.ProducerMessage(topic, record.EncodeKey("events", strconv.Itoa(k)), v, meta))
		if len(msgs) == cap(msgs) || k == keys-1 {
			if err := prod.SendMessages(msgs); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	prod.Close()
	// The player runs as a separate process, as in production and BenchmarkColdStart.
	addr := startPlayerProc(b, brokers, topic)
	cold := func(opts ...cacheclient.ViewOption) (time.Duration, cacheclient.ViewStats) {
		start := time.Now()
		c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "s", Service: "bench",
			ReadyIdle: 100 * time.Millisecond, MaxBatchEntries: 4096, MaxBatchBytes: 4 << 20}, cacheclient.WithLogger(benchLogger()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cacheclient.Register(c, "events", decodeEvent, opts...); err != nil {
			b.Fatal(err)
		}
		c.Start()
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := c.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), c.Stats().Views[0]
	}
	var whole, shard time.Duration
	var ws, ss cacheclient.ViewStats
	for b.Loop() {
		for range 3 {
			d, st := cold()
			if whole == 0 || d < whole {
				whole = d
			}
			ws = st
			d, st = cold(cacheclient.WithShard(0, shards))
			if shard == 0 || d < shard {
				shard = d
			}
			ss = st
		}
	}
	if ws.Len != keys {
		b.Fatalf("the unsharded client holds %d rows of %d", ws.Len, keys)
	}
	b.Logf("%d keys, shard 0 of %d: rows %d (%.2f%% of 1/n), memory %d of %d bytes (%.2f%% of 1/n); cold start %v, unsharded %v (%.3f)",
		keys, shards, ss.Len, 100*float64(ss.Len)*float64(shards)/float64(keys), ss.MemoryBytes, ws.MemoryBytes,
		100*float64(ss.MemoryBytes)*float64(shards)/float64(ws.MemoryBytes), shard, whole, float64(shard)/float64(whole))
	b.ReportMetric(float64(ss.Len)*float64(shards)/float64(keys), "rows-share×n")
	b.ReportMetric(float64(ss.MemoryBytes)*float64(shards)/float64(ws.MemoryBytes), "mem-share×n")
	b.ReportMetric(float64(shard)/float64(whole), "cold-ratio")
}
