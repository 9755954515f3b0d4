package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
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

func benchLogger() *slog.Logger {
	if os.Getenv("CC_BENCH_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkColdStart fills a topic with CC_BENCH_RECORDS records (default 3× the keys)
// over CC_BENCH_KEYS keys (default 1,000,000), then measures, in the same run:
//
//   - replay: a plain sarama consumer reading the partition from offset 0 to the end into
//     a map, decoding each value with the same decoder (the seed article's consumer);
//   - cold: a cacheclient without state to ready (snapshot bootstrap from a running player);
//   - restart: a cacheclient restarted from its StateDir to ready (state file load + resume);
//   - decode: the decoder alone over one value per key (where the time goes).
//
// The player is the player command in a process of its own (startPlayerProc), as in
// production: this process holds only the baseline's map and the clients.
// CC_BENCH_PLAYER=inproc runs it in this process.
//
// Run (in this module): cd cacheclient/e2e && go test -run '^$' -bench ColdStart -benchtime 1x -timeout 60m .
func BenchmarkColdStart(b *testing.B) {
	keys := envInt("CC_BENCH_KEYS", 1_000_000)
	records := envInt("CC_BENCH_RECORDS", 3*keys)
	brokers := testenv.KafkaBrokers(b)
	topic := testenv.NewTopic(b, "cacheclient-bench", map[string]string{"cleanup.policy": "compact"})
	cfg := kafkaconn.ProducerConfig("cacheclient-bench")
	prod, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	meta := record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	msgs := make([]*sarama.ProducerMessage, 0, 5000)
	for i := range records {
		k := i % keys
		v := fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation %d"}`, k, k%50, k, i/keys)
		msgs = append(msgs, recordsarama.ProducerMessage(topic, record.EncodeKey("events", strconv.Itoa(k)), v, meta))
		if len(msgs) == cap(msgs) || i == records-1 {
			if err := prod.SendMessages(msgs); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	prod.Close()
	b.Logf("produced %d records over %d keys in %v", records, keys, time.Since(start).Round(time.Millisecond))

	// Baseline: replay from offset 0 into a map.
	replay := func() time.Duration {
		start := time.Now()
		c, err := sarama.NewConsumer(brokers, kafkaconn.NewConfig("cacheclient-bench-replay"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		client, _ := sarama.NewClient(brokers, kafkaconn.NewConfig("cacheclient-bench-hwm"))
		end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
		client.Close()
		if err != nil {
			b.Fatal(err)
		}
		pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			b.Fatal(err)
		}
		defer pc.Close()
		m := map[string]event{}
		for msg := range pc.Messages() {
			if msg.Value == nil {
				delete(m, string(msg.Key))
			} else if e, err := decodeEvent("", msg.Value); err == nil {
				m[string(msg.Key)] = e
			}
			if msg.Offset+1 >= end {
				break
			}
		}
		if len(m) != keys {
			b.Fatalf("replay holds %d keys, want %d", len(m), keys)
		}
		return time.Since(start)
	}

	// The player runs as a separate process (as in production), so neither the replay nor
	// the client pays GC over its materialised copy of the topic; CC_BENCH_PLAYER=inproc
	// runs it in this process instead, where both do.
	pstart := time.Now()
	var addr string
	if os.Getenv("CC_BENCH_PLAYER") == "inproc" {
		var stop func()
		addr, stop = startPlayerB(b, &kafkaEnv{t: nil, brokers: brokers, topic: topic})
		defer stop()
	} else {
		addr = startPlayerProc(b, brokers, topic)
	}
	playerReady := time.Since(pstart)

	dir := b.TempDir()
	client := func(stateDir string, window int32) (time.Duration, *cacheclient.Client) {
		start := time.Now()
		c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "s", Service: "bench", StateDir: stateDir,
			ReadyIdle: 100 * time.Millisecond, MaxBatchEntries: 4096, MaxBatchBytes: 4 << 20, RecvWindow: window},
			cacheclient.WithLogger(benchLogger()))
		if err != nil {
			b.Fatal(err)
		}
		v, _ := cacheclient.Register(c, "events", decodeEvent)
		c.Start()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		if err := c.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if v.Len() != keys {
			b.Fatalf("client holds %d keys, want %d", v.Len(), keys)
		}
		return d, c
	}

	b.ResetTimer()
	tReplay := replay()
	// cold: the default client (8 MiB flow-control window, DefaultRecvWindow);
	// cold-grpcwin: the same with gRPC's own window (RecvWindow -1), run first or second
	// alternately (CC_BENCH_ORDER=1: second).
	var tCold, tColdG time.Duration
	var c *cacheclient.Client
	stopProf := cpuProfile(b, "cold")
	if os.Getenv("CC_BENCH_ORDER") == "1" {
		tCold, c = client("", 0)
		c.Close()
		tColdG, c = client("", -1)
		c.Close()
	} else {
		tColdG, c = client("", -1)
		c.Close()
		tCold, c = client("", 0)
		c.Close()
	}
	stopProf()
	_, c = client(dir, 0) // writes the state file at Close
	tClose := time.Now()
	c.Close()
	closeWrite := time.Since(tClose)
	stopProf = cpuProfile(b, "restart")
	tRestart, c := client(dir, 0)
	stopProf()
	c.Close()
	b.StopTimer()

	// Decoder alone, one value per key.
	vals := make([][]byte, keys)
	for k := range vals {
		vals[k] = fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation %d"}`, k, k%50, k, 2)
	}
	dstart := time.Now()
	for _, v := range vals {
		decodeEvent("", v)
	}
	tDecode := time.Since(dstart)

	ks := func(d time.Duration) float64 { return float64(keys) / d.Seconds() }
	b.ReportMetric(tReplay.Seconds(), "replay-s")
	b.ReportMetric(tCold.Seconds(), "cold-s")
	b.ReportMetric(tRestart.Seconds(), "restart-s")
	b.ReportMetric(ks(tCold), "cold-keys/s")
	b.ReportMetric(ks(tRestart), "restart-keys/s")
	b.ReportMetric(ks(tReplay), "replay-keys/s")
	b.ReportMetric(tReplay.Seconds()/tCold.Seconds(), "replay/cold")
	b.ReportMetric(tReplay.Seconds()/tColdG.Seconds(), "replay/cold-grpcwin")
	b.ReportMetric(tReplay.Seconds()/tRestart.Seconds(), "replay/restart")
	b.Logf("keys %d records %d: replay %v, cold (snapshot) %v (gRPC's window: %v), restart (StateDir) %v, state file write at Close %v, player ready %v, decode only %v (%.0f keys/s)",
		keys, records, tReplay.Round(time.Millisecond), tCold.Round(time.Millisecond), tColdG.Round(time.Millisecond), tRestart.Round(time.Millisecond),
		closeWrite.Round(time.Millisecond), playerReady.Round(time.Millisecond), tDecode.Round(time.Millisecond), ks(tDecode))
}

// cpuProfile writes a CPU profile of one phase to $CC_BENCH_CPUPROFILE-phase.pprof when
// that variable is set; it returns the function that stops it.
func cpuProfile(b *testing.B, phase string) func() {
	prefix := os.Getenv("CC_BENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + phase + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
