package main

// cachebench distributor-snapshot (issue 2 §6): a full snapshot of N rows of about 200
// bytes, in rows per second, beside two limits measured in the same run on the same data:
// COPY (query) TO STDOUT read by pgx, and raw sarama producers sending equal records (same
// keys, values and headers, the distributor's producer settings).

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

func init() {
	register("distributor-snapshot", "full snapshot rows/s vs COPY and raw sarama limits (issue 2 §6)", runDistributorSnapshot)
}

const snapshotQuery = "SELECT id, name, category, price, qty, active, updated_at, note FROM bench"

type rateResult struct {
	name string
	rows int64
	d    time.Duration
}

func (r rateResult) rate() float64 { return float64(r.rows) / r.d.Seconds() }

func (r rateResult) String() string {
	return fmt.Sprintf("  %-46s %9.0f rows/s  (%d rows in %.2fs)", r.name, r.rate(), r.rows, r.d.Seconds())
}

func runDistributorSnapshot(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("distributor-snapshot", flag.ExitOnError)
	rows := fs.Int("rows", 1_000_000, "rows in the table")
	runs := fs.Int("runs", 1, "measure every contender this many times (each run is printed)")
	_ = fs.Parse(args)

	env, err := newDistEnv(ctx)
	if err != nil {
		return err
	}
	defer env.close()
	conn, err := pgx.Connect(ctx, env.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	fmt.Printf("distributor-snapshot: loading %d rows...\n", *rows)
	if _, err := conn.Exec(ctx, `CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL,
		category text NOT NULL, price numeric(12,2) NOT NULL, qty integer NOT NULL, active boolean NOT NULL,
		updated_at timestamptz NOT NULL, note text)`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO bench SELECT i, 'Selection ' || i || ' of market ' || (i / 3),
		'category-' || (i % 97), (i % 100000) / 100.0, i % 1000, i % 7 <> 0,
		timestamptz '2026-11-29 00:00:00+00' + i * interval '1 millisecond',
		md5(i::text)
		FROM generate_series(1, $1::bigint) AS i`, *rows); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE bench"); err != nil {
		return err
	}

	// The records the distributor will publish, encoded once (outside any timing) for the
	// raw producers: same keys, values and headers.
	keys, values, encRes, err := encodeBench(ctx, conn)
	if err != nil {
		return err
	}
	var kb, vb int
	for i := range keys {
		kb += len(keys[i])
		vb += len(values[i])
	}
	fmt.Printf("rows=%d  avg key=%dB  avg value=%dB  headers=5 sc-* headers  producer=kafkaconn.ProducerConfig (idempotent, acks=all, 1 in flight, lz4)\n",
		len(keys), kb/len(keys), vb/len(keys))
	fmt.Printf("example value: %s\n\n", values[len(values)/2])

	var ratios, distRates []float64
	for run := 1; run <= *runs; run++ {
		fmt.Printf("run %d:\n", run)
		c, err := copyRead(ctx, conn)
		if err != nil {
			return err
		}
		fmt.Println(c)
		if run > 1 {
			if _, _, encRes, err = encodeBench(ctx, conn); err != nil {
				return err
			}
		}
		fmt.Println(encRes)

		sync, err := saramaSync(env, keys, values)
		if err != nil {
			return err
		}
		fmt.Println(sync)
		async, err := saramaAsync(env, keys, values)
		if err != nil {
			return err
		}
		fmt.Println(async)

		d, err := distributorSnapshot(ctx, env, int64(len(keys)))
		if err != nil {
			return err
		}
		fmt.Println(d)
		// The slower limit of this run: COPY, or sarama at its best (async or sync).
		slower := min(c.rate(), max(sync.rate(), async.rate()))
		ratio := d.rate() / slower
		fmt.Printf("  => distributor / slower limit of this run = %.0f%%\n", 100*ratio)
		ratios = append(ratios, ratio)
		distRates = append(distRates, d.rate())
	}
	slices.Sort(ratios)
	slices.Sort(distRates)
	med := func(x []float64) float64 { return x[len(x)/2] }
	fmt.Printf("\nmedian of %d run(s): distributor %.0f rows/s, %.0f%% of the slower limit (worst run %.0f%%)\n",
		*runs, med(distRates), 100*med(ratios), 100*ratios[0])
	fmt.Printf("goal >= 100000 rows/s and >= 50%% of the slower limit: %s\n",
		map[bool]string{true: "MET", false: "NOT MET"}[med(distRates) >= 100000 && med(ratios) >= 0.5])
	return nil
}

// encodeBench reads the table with pgx (binary) and encodes every row with pgjson, the
// distributor's read side without Kafka.
func encodeBench(ctx context.Context, conn *pgx.Conn) (keys, values [][]byte, res rateResult, err error) {
	start := time.Now()
	sd, err := conn.Prepare(ctx, "", snapshotQuery)
	if err != nil {
		return nil, nil, res, err
	}
	enc, err := pgjson.Compile(ctx, conn, sd.Fields, []string{"id"})
	if err != nil {
		return nil, nil, res, err
	}
	rows, err := conn.Query(ctx, snapshotQuery, pgjson.ResultFormats)
	if err != nil {
		return nil, nil, res, err
	}
	defer rows.Close()
	var arena []byte
	for rows.Next() {
		raw := rows.RawValues()
		if cap(arena)-len(arena) < 4096 {
			arena = make([]byte, 0, 1<<20)
		}
		n := len(arena)
		if arena, err = enc.AppendKey(arena, "bench", raw); err != nil {
			return nil, nil, res, err
		}
		keys = append(keys, arena[n:len(arena):len(arena)])
		n = len(arena)
		if arena, err = enc.AppendValue(arena, raw); err != nil {
			return nil, nil, res, err
		}
		values = append(values, arena[n:len(arena):len(arena)])
	}
	if err := rows.Err(); err != nil {
		return nil, nil, res, err
	}
	return keys, values, rateResult{"pgx query + pgjson encode (no Kafka; info)", int64(len(keys)), time.Since(start)}, nil
}

type lineCounter struct{ lines int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// copyRead is limit 1: COPY (query) TO STDOUT read by pgx.
func copyRead(ctx context.Context, conn *pgx.Conn) (rateResult, error) {
	var lc lineCounter
	start := time.Now()
	if _, err := conn.PgConn().CopyTo(ctx, &lc, "COPY ("+snapshotQuery+") TO STDOUT"); err != nil {
		return rateResult{}, err
	}
	return rateResult{"limit: COPY (query) TO STDOUT read by pgx", lc.lines, time.Since(start)}, nil
}

func benchMessages(topic string, keys, values [][]byte) []*sarama.ProducerMessage {
	meta := record.Meta{View: "bench", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/16B3748"}
	hdrs := recordsarama.Headers(meta)
	msgs := make([]*sarama.ProducerMessage, len(keys))
	for i := range keys {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(keys[i]),
			Value: sarama.ByteEncoder(values[i]), Headers: hdrs}
	}
	return msgs
}

func createCompacted(env *distEnv, prefix string) (string, error) {
	topic := env.topic(prefix)
	a, err := sarama.NewClusterAdmin(env.brokers, kafkaconn.NewConfig("cachebench"))
	if err != nil {
		return "", err
	}
	defer a.Close()
	compact := "compact"
	return topic, a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
}

// syncChunk is the chunk size of the SyncProducer limit.
const syncChunk = 5000

// saramaSync is limit 2a: a SyncProducer sending chunks of syncChunk records.
func saramaSync(env *distEnv, keys, values [][]byte) (rateResult, error) {
	topic, err := createCompacted(env, "bench_sync")
	if err != nil {
		return rateResult{}, err
	}
	msgs := benchMessages(topic, keys, values)
	p, err := sarama.NewSyncProducer(env.brokers, kafkaconn.ProducerConfig("cachebench"))
	if err != nil {
		return rateResult{}, err
	}
	start := time.Now()
	for i := 0; i < len(msgs); i += syncChunk {
		if err := p.SendMessages(msgs[i:min(len(msgs), i+syncChunk)]); err != nil {
			_ = p.Close()
			return rateResult{}, err
		}
	}
	d := time.Since(start)
	if err := p.Close(); err != nil {
		return rateResult{}, err
	}
	return rateResult{fmt.Sprintf("limit: sarama SyncProducer, chunks of %d", syncChunk), int64(len(msgs)), d}, nil
}

// saramaAsync is limit 2b: an AsyncProducer fed continuously (sarama's best case; the
// distributor's producer works this way).
func saramaAsync(env *distEnv, keys, values [][]byte) (rateResult, error) {
	topic, err := createCompacted(env, "bench_async")
	if err != nil {
		return rateResult{}, err
	}
	msgs := benchMessages(topic, keys, values)
	p, err := sarama.NewAsyncProducer(env.brokers, kafkaconn.ProducerConfig("cachebench"))
	if err != nil {
		return rateResult{}, err
	}
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		var first error
		for n := 0; n < len(msgs); n++ {
			select {
			case <-p.Successes():
			case e := <-p.Errors():
				if first == nil {
					first = e
				}
			}
		}
		errc <- first
	}()
	for _, m := range msgs {
		p.Input() <- m
	}
	err = <-errc
	d := time.Since(start)
	_ = p.Close()
	if err != nil {
		return rateResult{}, err
	}
	return rateResult{"limit: sarama AsyncProducer, pipelined", int64(len(msgs)), d}, nil
}

// distributorSnapshot runs a distributor with one view over the table into a fresh topic
// and times Run → WaitReady (topic creation, empty restore, the snapshot epoch).
func distributorSnapshot(ctx context.Context, env *distEnv, rows int64) (rateResult, error) {
	topic := env.topic("bench_dist")
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.brokers, ClientID: "cachebench"}},
		Streams: []distributor.StreamConfig{{Topic: topic, Views: []distributor.ViewConfig{
			{Name: "bench", SQL: snapshotQuery, Key: []string{"id"}},
		}}},
	}
	r, d, err := startDistributor(ctx, cfg)
	if err != nil {
		return rateResult{}, err
	}
	if err := r.stop(); err != nil {
		return rateResult{}, err
	}
	end, err := distEndOffset(env.brokers, topic)
	if err != nil {
		return rateResult{}, err
	}
	if end < rows+2 {
		return rateResult{}, fmt.Errorf("distributor topic holds %d records, want %d rows + begin + end", end, rows)
	}
	return rateResult{"distributor full snapshot (Run -> WaitReady)", rows, d}, nil
}
