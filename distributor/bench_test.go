package distributor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// BenchmarkSnapshot measures a full start-up snapshot of N rows of about 200 bytes (env
// DIST_BENCH_ROWS, default 200000) into a fresh topic, and prints beside it the two limits
// measured in the same run on the same data:
//
//   - copy:     COPY (query) TO STDOUT read by pgx (the database's read limit);
//   - producer: a raw sarama producer (same idempotent settings, async, pipelined) sending
//     the very row records the distributor wrote (same keys, values and five headers, read
//     back from its topic before timing): the broker's write limit.
//
// Run: make infra; set -a; . .run/env; set +a;
// go test -run '^$' -bench BenchmarkSnapshot -benchtime 1x ./distributor/
func BenchmarkSnapshot(b *testing.B) {
	n := 200000
	if s := os.Getenv("DIST_BENCH_ROWS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newBenchEnv(b)
	ctx := context.Background()
	e.exec(`CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL,
		price numeric(12,2) NOT NULL, note text NOT NULL, updated_at timestamptz NOT NULL)`)
	e.exec(fmt.Sprintf(`INSERT INTO bench SELECT i, 'name-' || i, i %% 1000, (i %% 100000) / 100.0,
		repeat(md5(i::text), 3), '2026-01-01'::timestamptz + i * interval '1 ms' FROM generate_series(1, %d) i`, n))
	e.exec(`VACUUM ANALYZE bench`)
	sql := "SELECT id, name, qty, price, note, updated_at FROM bench"

	for i := 0; i < b.N; i++ {
		// limit 1: COPY read by pgx
		start := time.Now()
		conn := e.connect()
		if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY ("+sql+") TO STDOUT"); err != nil {
			b.Fatal(err)
		}
		copyDur := time.Since(start)

		// the distributor's full snapshot into a fresh topic
		e.topic = fmt.Sprintf("bench_%d_%d", time.Now().UnixNano(), i)
		deleteTopicLater(b, e.brokers, e.topic)
		d, err := New(e.config(ViewConfig{Name: "bench", SQL: sql, Key: []string{"id"}}), WithLogger(benchLogger()))
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start = time.Now()
		go func() { done <- d.Run(rctx) }()
		if err := d.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		snapDur := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		recs := readAllB(b, e.brokers, e.topic)
		if recs != int64(n)+2 {
			b.Fatalf("topic has %d records, want %d", recs, n+2)
		}

		// restart: restore key → hash from the topic, re-read the view, publish nothing
		d2, err := New(e.config(ViewConfig{Name: "bench", SQL: sql, Key: []string{"id"}}), WithLogger(benchLogger()))
		if err != nil {
			b.Fatal(err)
		}
		rctx2, cancel2 := context.WithCancel(ctx)
		start = time.Now()
		go func() { done <- d2.Run(rctx2) }()
		if err := d2.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		restartDur := time.Since(start)
		cancel2()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if recs2 := readAllB(b, e.brokers, e.topic); recs2 != recs+2 {
			b.Fatalf("restart published %d records, want 2 (begin, end)", recs2-recs)
		}

		// limit 2: raw sarama producer sending records of the same size to a fresh topic
		rawTopic := e.topic + "_raw"
		deleteTopicLater(b, e.brokers, rawTopic)
		// the very records the distributor wrote (read back before timing)
		keys, vals := rowRecords(b, e.brokers, e.topic)
		if len(keys) != n {
			b.Fatalf("read back %d row records, want %d", len(keys), n)
		}
		valBytes := 0
		for _, v := range vals {
			valBytes += len(v)
		}
		start = time.Now()
		if err := rawProduce(e.brokers, rawTopic, keys, vals); err != nil {
			b.Fatal(err)
		}
		rawDur := time.Since(start)

		rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
		slower := min(rate(copyDur), rate(rawDur))
		b.ReportMetric(rate(snapDur), "rows/s")
		b.Logf("rows=%d value≈%dB  snapshot: %.0f rows/s (%v)  copy: %.0f rows/s (%v)  raw producer: %.0f rows/s (%v)  snapshot/slower-limit = %.0f%%  restart (restore+reconcile, nothing republished): %v",
			n, valBytes/n, rate(snapDur), snapDur.Round(time.Millisecond), rate(copyDur), copyDur.Round(time.Millisecond),
			rate(rawDur), rawDur.Round(time.Millisecond), 100*rate(snapDur)/slower, restartDur.Round(time.Millisecond))
	}
}

func rawProduce(brokers []string, topic string, keys, vals [][]byte) error {
	n := len(keys)
	cfg := kafkaconn.ProducerConfig("bench-raw")
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Flush.Frequency = time.Millisecond
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("bench"))
	if err != nil {
		return err
	}
	compact := "compact"
	_ = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
	_ = admin.Close()
	// the same five sc-* headers as the distributor's records ("equal records")
	hdrs := recordsarama.Headers(record.Meta{View: "bench", Kind: record.KindRow, Epoch: 1,
		SourceTime: time.Now(), SourceLSN: "0/6AEAA9A0"})
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		var first error
		for i := 0; i < n; i++ {
			select {
			case <-p.Successes():
			case perr := <-p.Errors():
				if first == nil {
					first = perr
				}
			}
		}
		errc <- first
	}()
	for i := 0; i < n; i++ {
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(keys[i]), Value: sarama.ByteEncoder(vals[i]), Headers: hdrs}
	}
	err = <-errc
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

func benchLogger() *slog.Logger {
	if os.Getenv("DIST_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// rowRecords reads the row records of a topic (keys and values).
func rowRecords(b *testing.B, brokers []string, topic string) (keys, vals [][]byte) {
	b.Helper()
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("bench-reader"))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	start, end, err := kafkaconn.CommittedOffsets(client, topic, 0)
	if err != nil {
		b.Fatal(err)
	}
	err = kafkaconn.ReadCommitted(context.Background(), client, topic, 0, start, end, func(m *sarama.ConsumerMessage) error {
		if !record.IsControlKey(m.Key) && m.Value != nil {
			keys = append(keys, m.Key)
			vals = append(vals, m.Value)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return keys, vals
}
