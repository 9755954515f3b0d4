package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

const snapshotSchema = `CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL,
	category text NOT NULL, price numeric(12,2) NOT NULL, qty integer NOT NULL, active boolean NOT NULL,
	updated_at timestamptz NOT NULL, note text)`

const snapshotQuery = "SELECT id, name, category, price, qty, active, updated_at, note FROM bench"

// syncChunk is the chunk size of the SyncProducer limit.
const syncChunk = 5000

// runDistributorSnapshot measures a full snapshot of N rows of about 200 bytes, in rows
// per second, beside two limits measured in the same run on the same data: COPY (query)
// TO STDOUT read by pgx, and raw sarama producers sending equal records (same keys, values
// and headers, the distributor's producer settings).
func runDistributorSnapshot(ctx context.Context, args *bench.Args, w io.Writer) error {
	rows := args.Int("rows", 1_000_000, "rows in the table")
	runs := args.Int("runs", 1, "measure every contender this many times (each run is printed)")
	capture := args.String("capture", distributor.CaptureWAL, "the stream's capture mode, wal (the default: the slot is created first) or poll")
	env, err := bench.NewDistEnv(ctx, args, snapshotSchema)
	if err != nil {
		return err
	}
	defer env.Close()
	conn := env.Conn
	fmt.Fprintf(w, "distributor-snapshot: loading %d rows...\n", *rows)
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
	fmt.Fprintf(w, "rows=%d  avg key=%dB  avg value=%dB  headers=5 sc-* headers  producer=kafkaconn.ProducerConfig (idempotent, acks=all, 1 in flight, lz4)\n",
		len(keys), kb/len(keys), vb/len(keys))
	fmt.Fprintf(w, "example value: %s\n\n", values[len(values)/2])

	var ratios, distRates []float64
	for run := 1; run <= *runs; run++ {
		fmt.Fprintf(w, "run %d:\n", run)
		c, err := copyRead(ctx, conn)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, c)
		if run > 1 {
			if _, _, encRes, err = encodeBench(ctx, conn); err != nil {
				return err
			}
		}
		fmt.Fprintln(w, encRes)

		sync, err := rawProducer(env, "bench_sync", fmt.Sprintf("limit: sarama SyncProducer, chunks of %d", syncChunk), keys, values,
			func(msgs []*sarama.ProducerMessage) (time.Duration, error) {
				return bench.ProduceSync(env.Brokers, msgs, syncChunk)
			})
		if err != nil {
			return err
		}
		fmt.Fprintln(w, sync)
		async, err := rawProducer(env, "bench_async", "limit: sarama AsyncProducer, pipelined", keys, values,
			func(msgs []*sarama.ProducerMessage) (time.Duration, error) {
				return bench.ProduceAsync(env.Brokers, msgs)
			})
		if err != nil {
			return err
		}
		fmt.Fprintln(w, async)

		d, err := distributorSnapshot(ctx, env, int64(len(keys)), *capture)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, d)
		// The slower limit of this run: COPY, or sarama at its best (async or sync).
		slower := min(c.PerSecond(), max(sync.PerSecond(), async.PerSecond()))
		ratio := bench.Ratio(d.PerSecond(), slower)
		fmt.Fprintf(w, "  => distributor / slower limit of this run = %.0f%%\n", 100*ratio)
		ratios = append(ratios, ratio)
		distRates = append(distRates, d.PerSecond())
	}
	medRate, medRatio := bench.Median(distRates), bench.Median(ratios)
	fmt.Fprintf(w, "\nmedian of %d run(s): distributor %.0f rows/s, %.0f%% of the slower limit (worst run %.0f%%)\n",
		*runs, medRate, 100*medRatio, 100*slices.Min(ratios))
	fmt.Fprintf(w, "goal >= 100000 rows/s and >= 50%% of the slower limit: %s\n",
		bench.Verdict(medRate >= 100000 && medRatio >= 0.5))
	return nil
}

// encodeBench reads the table with pgx (binary) and encodes every row with pgjson, the
// distributor's read side without Kafka.
func encodeBench(ctx context.Context, conn *pgx.Conn) (keys, values [][]byte, res bench.Rate, err error) {
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
	return keys, values, bench.Rate{Name: "pgx query + pgjson encode (no Kafka; info)", Rows: int64(len(keys)), D: time.Since(start)}, nil
}

type lineCounter struct{ lines int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// copyRead is limit 1: COPY (query) TO STDOUT read by pgx.
func copyRead(ctx context.Context, conn *pgx.Conn) (bench.Rate, error) {
	var lc lineCounter
	start := time.Now()
	if _, err := conn.PgConn().CopyTo(ctx, &lc, "COPY ("+snapshotQuery+") TO STDOUT"); err != nil {
		return bench.Rate{}, err
	}
	return bench.Rate{Name: "limit: COPY (query) TO STDOUT read by pgx", Rows: lc.lines, D: time.Since(start)}, nil
}

// rawProducer is limit 2: the records the distributor publishes (same keys, values and
// headers), sent to a fresh topic by produce.
func rawProducer(env *bench.DistEnv, prefix, name string, keys, values [][]byte,
	produce func([]*sarama.ProducerMessage) (time.Duration, error)) (bench.Rate, error) {
	topic, err := env.CreateTopic(prefix)
	if err != nil {
		return bench.Rate{}, err
	}
	meta := record.Meta{View: "bench", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/16B3748"}
	hdrs := recordsarama.Headers(meta)
	msgs := make([]*sarama.ProducerMessage, len(keys))
	for i := range keys {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(keys[i]),
			Value: sarama.ByteEncoder(values[i]), Headers: hdrs}
	}
	d, err := produce(msgs)
	if err != nil {
		return bench.Rate{}, err
	}
	return bench.Rate{Name: name, Rows: int64(len(msgs)), D: d}, nil
}

// distributorSnapshot runs a distributor with one view over the table into a fresh topic
// and times Run → WaitReady (topic creation, empty restore, the snapshot epoch).
func distributorSnapshot(ctx context.Context, env *bench.DistEnv, rows int64, capture string) (bench.Rate, error) {
	topic := env.Topic("bench_dist")
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.DSN},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.Brokers, ClientID: "cachebench"}},
		Streams: []distributor.StreamConfig{{Topic: topic, Capture: capture, Views: []distributor.ViewConfig{
			{Name: "bench", SQL: snapshotQuery, Key: []string{"id"}},
		}}},
	}
	r, d, err := bench.StartDistributor(ctx, cfg)
	if err != nil {
		return bench.Rate{}, err
	}
	if err := r.Stop(); err != nil {
		return bench.Rate{}, err
	}
	// Each run's wal stream has its own slot: drop it now, not with the database.
	if err := bench.DropSlots(ctx, env.Conn, env.DB()); err != nil {
		return bench.Rate{}, err
	}
	end, err := bench.EndOffset(env.Brokers, topic)
	if err != nil {
		return bench.Rate{}, err
	}
	if end < rows+2 {
		return bench.Rate{}, fmt.Errorf("distributor topic holds %d records, want %d rows + begin + end", end, rows)
	}
	return bench.Rate{Name: "distributor full snapshot (Run -> WaitReady)", Rows: rows, D: d}, nil
}
