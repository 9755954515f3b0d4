package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
)

const latencySchema = `
CREATE TABLE lat (id integer PRIMARY KEY, v bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.updated_at := clock_timestamp(); RETURN NEW; END $$;
CREATE FUNCTION notify_lat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('bench_lat', ''); RETURN NULL; END $$;
CREATE TRIGGER lat_touch BEFORE INSERT OR UPDATE ON lat FOR EACH ROW EXECUTE FUNCTION touch();
CREATE TRIGGER lat_notify AFTER INSERT OR UPDATE ON lat FOR EACH STATEMENT EXECUTE FUNCTION notify_lat();
`

// runDistributorLatency measures the time from a transaction's commit to its row being
// readable in Kafka, p50/p99, with and without the LISTEN wake-up, beside the floor
// measured in the same run: a raw sarama produce → consume of one record.
func runDistributorLatency(ctx context.Context, args *bench.Args, w io.Writer) error {
	samples := args.Int("samples", 400, "committed updates per mode")
	every := args.Duration("every", 25*time.Millisecond, "pause between updates")
	poll := args.Duration("poll", distributor.DefaultPollInterval, "the view's poll_interval")
	env, err := bench.NewDistEnv(ctx, args, latencySchema)
	if err != nil {
		return err
	}
	defer env.Close()
	if _, err := env.Conn.Exec(ctx, "INSERT INTO lat SELECT i, 0 FROM generate_series(0, $1::int) AS i", *samples); err != nil {
		return err
	}
	fmt.Fprintf(w, "distributor-latency: %d committed single-row updates per mode, one every %v; poll_interval %v, overlap 1s\n",
		*samples, *every, *poll)
	fmt.Fprintln(w, "latency = first consumer sight of the record - time just before COMMIT was sent")
	fmt.Fprintln(w)

	floor, err := rawLatency(ctx, env, *samples, *every)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, bench.Summarize(floor).Line("floor: raw sarama produce -> consume"))
	for _, listen := range []bool{false, true} {
		ds, err := commitLatency(ctx, env, listen, *samples, *every, *poll)
		if err != nil {
			return err
		}
		name := "distributor, poll only (no LISTEN)"
		if listen {
			name = "distributor, LISTEN wake-up"
		}
		fmt.Fprintln(w, bench.Summarize(ds).Line(name))
	}
	return nil
}

// rawLatency is the floor: one record at a time through a SyncProducer (the
// distributor's settings) to a consumer.
func rawLatency(ctx context.Context, env *bench.DistEnv, n int, every time.Duration) ([]time.Duration, error) {
	topic, err := env.CreateTopic("bench_rawlat")
	if err != nil {
		return nil, err
	}
	a, err := bench.ConsumeFrom(ctx, env.Brokers, topic, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	p, err := sarama.NewSyncProducer(env.Brokers, kafkaconn.ProducerConfig("cachebench"))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	// Warm-up: the consumer's first fetch and the producer's connection are not measured.
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("warm-up")}); err != nil {
		return nil, err
	}
	if _, err := a.Collect(ctx, []string{"warm-up"}, []time.Time{time.Now()}, 30*time.Second); err != nil {
		return nil, err
	}
	keys := make([]string, n)
	sent := make([]time.Time, n)
	for i := range n {
		keys[i] = "raw|" + strconv.Itoa(i)
		sent[i] = time.Now()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(keys[i]),
			Value: sarama.StringEncoder(`{"id":` + strconv.Itoa(i) + `}`)}); err != nil {
			return nil, err
		}
		time.Sleep(every)
	}
	return a.Collect(ctx, keys, sent, 30*time.Second)
}

// commitLatency runs a distributor on a fresh topic and times n committed updates.
func commitLatency(ctx context.Context, env *bench.DistEnv, listen bool, n int, every, poll time.Duration) ([]time.Duration, error) {
	topic := env.Topic("bench_lat")
	v := distributor.ViewConfig{Name: "lat", SQL: "SELECT id, v, updated_at FROM lat", Key: []string{"id"},
		ViewSettings: distributor.ViewSettings{Incremental: "updated_at", PollInterval: poll}}
	if err := v.Overlap.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Value: "1s"}); err != nil {
		return nil, err
	}
	if listen {
		v.Listen = "bench_lat"
	}
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.DSN},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.Brokers, ClientID: "cachebench"}},
		// This benchmark measures polling: the stream says so (WAL capture is the default).
		Streams: []distributor.StreamConfig{{Topic: topic, Capture: distributor.CapturePoll, Views: []distributor.ViewConfig{v}}},
	}
	r, _, err := bench.StartDistributor(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer r.Stop()
	end, err := bench.EndOffset(env.Brokers, topic)
	if err != nil {
		return nil, err
	}
	a, err := bench.ConsumeFrom(ctx, env.Brokers, topic, end)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	timeout := 30*time.Second + 10*poll
	// Warm-up: one unmeasured update (row n) seen by the consumer first.
	if _, err := env.Conn.Exec(ctx, "UPDATE lat SET v = v + 1 WHERE id = $1", n); err != nil {
		return nil, err
	}
	if _, err := a.Collect(ctx, []string{"lat|" + strconv.Itoa(n)}, []time.Time{time.Now()}, timeout); err != nil {
		return nil, err
	}
	keys := make([]string, n)
	sent := make([]time.Time, n)
	for i := range n {
		keys[i] = "lat|" + strconv.Itoa(i)
		if err := commitUpdate(ctx, env.Conn, i, &sent[i]); err != nil {
			return nil, err
		}
		time.Sleep(every)
	}
	return a.Collect(ctx, keys, sent, timeout)
}

// commitUpdate updates row id in its own transaction and sets *sent just before COMMIT.
func commitUpdate(ctx context.Context, conn *pgx.Conn, id int, sent *time.Time) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "UPDATE lat SET v = v + 1 WHERE id = $1", id); err != nil {
		return err
	}
	*sent = time.Now()
	return tx.Commit(ctx)
}
