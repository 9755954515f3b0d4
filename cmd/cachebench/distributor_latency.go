package main

// cachebench distributor-latency (issue 2 §6): the time from a transaction's commit to
// its row being readable in Kafka, p50/p99, with and without the LISTEN wake-up, beside
// the floor measured in the same run: a raw sarama produce → consume of one record.

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
)

func init() {
	register("distributor-latency", "commit -> record in Kafka p50/p99, with and without LISTEN (issue 2 §6)", runDistributorLatency)
}

const latencySchema = `
CREATE TABLE lat (id integer PRIMARY KEY, v bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.updated_at := clock_timestamp(); RETURN NEW; END $$;
CREATE FUNCTION notify_lat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('bench_lat', ''); RETURN NULL; END $$;
CREATE TRIGGER lat_touch BEFORE INSERT OR UPDATE ON lat FOR EACH ROW EXECUTE FUNCTION touch();
CREATE TRIGGER lat_notify AFTER INSERT OR UPDATE ON lat FOR EACH STATEMENT EXECUTE FUNCTION notify_lat();
`

func runDistributorLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("distributor-latency", flag.ExitOnError)
	samples := fs.Int("samples", 400, "committed updates per mode")
	every := fs.Duration("every", 25*time.Millisecond, "pause between updates")
	poll := fs.Duration("poll", distributor.DefaultPollInterval, "the view's poll_interval")
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
	if _, err := conn.Exec(ctx, latencySchema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "INSERT INTO lat SELECT i, 0 FROM generate_series(0, $1::int) AS i", *samples); err != nil {
		return err
	}
	fmt.Printf("distributor-latency: %d committed single-row updates per mode, one every %v; poll_interval %v, overlap 1s\n",
		*samples, *every, *poll)
	fmt.Println("latency = first consumer sight of the record - time just before COMMIT was sent")
	fmt.Println()

	floor, err := rawLatency(ctx, env, *samples, *every)
	if err != nil {
		return err
	}
	fmt.Println(distLatencyLine("floor: raw sarama produce -> consume", floor))
	for _, listen := range []bool{false, true} {
		ds, err := commitLatency(ctx, env, conn, listen, *samples, *every, *poll)
		if err != nil {
			return err
		}
		name := "distributor, poll only (no LISTEN)"
		if listen {
			name = "distributor, LISTEN wake-up"
		}
		fmt.Println(distLatencyLine(name, ds))
	}
	return nil
}

// arrivals records when a consumer first saw each key.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]time.Time
	cond chan struct{}
}

func (a *arrivals) get(key string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.seen[key]
	return t, ok
}

// consumeFrom starts a consumer of topic at offset from that records arrival times.
func consumeFrom(ctx context.Context, brokers []string, topic string, from int64) (*arrivals, func(), error) {
	cfg := kafkaconn.NewConfig("cachebench-lat")
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	c, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		return nil, nil, err
	}
	pc, err := c.ConsumePartition(topic, 0, from)
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	a := &arrivals{seen: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-pc.Messages():
				now := time.Now()
				a.mu.Lock()
				if _, ok := a.seen[string(m.Key)]; !ok {
					a.seen[string(m.Key)] = now
				}
				a.mu.Unlock()
			case <-pc.Errors():
			}
		}
	})
	stop := func() {
		cancel()
		wg.Wait()
		_ = pc.Close()
		_ = c.Close()
	}
	return a, stop, nil
}

// collect waits until every key arrived (or timeout) and returns arrival - sent.
func collect(ctx context.Context, a *arrivals, keys []string, sent []time.Time, timeout time.Duration) ([]time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var out []time.Duration
	for i := 0; i < len(keys); {
		if t, ok := a.get(keys[i]); ok {
			out = append(out, t.Sub(sent[i]))
			i++
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("record %s not seen within %v", keys[i], timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return out, nil
}

// rawLatency is the floor: one record at a time through a SyncProducer (the
// distributor's settings) to a consumer.
func rawLatency(ctx context.Context, env *distEnv, n int, every time.Duration) ([]time.Duration, error) {
	topic, err := createCompacted(env, "bench_rawlat")
	if err != nil {
		return nil, err
	}
	a, stop, err := consumeFrom(ctx, env.brokers, topic, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer stop()
	p, err := sarama.NewSyncProducer(env.brokers, kafkaconn.ProducerConfig("cachebench"))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	// Warm-up: the consumer's first fetch and the producer's connection are not measured.
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("warm-up")}); err != nil {
		return nil, err
	}
	if _, err := collect(ctx, a, []string{"warm-up"}, []time.Time{time.Now()}, 30*time.Second); err != nil {
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
	return collect(ctx, a, keys, sent, 30*time.Second)
}

// commitLatency runs a distributor on a fresh topic and times n committed updates.
func commitLatency(ctx context.Context, env *distEnv, conn *pgx.Conn, listen bool, n int, every, poll time.Duration) ([]time.Duration, error) {
	topic := env.topic("bench_lat")
	v := distributor.ViewConfig{Name: "lat", SQL: "SELECT id, v, updated_at FROM lat", Key: []string{"id"},
		ViewSettings: distributor.ViewSettings{Incremental: "updated_at", PollInterval: poll}}
	if err := v.Overlap.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Value: "1s"}); err != nil {
		return nil, err
	}
	if listen {
		v.Listen = "bench_lat"
	}
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.brokers, ClientID: "cachebench"}},
		Streams:  []distributor.StreamConfig{{Topic: topic, Views: []distributor.ViewConfig{v}}},
	}
	r, _, err := startDistributor(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	end, err := distEndOffset(env.brokers, topic)
	if err != nil {
		return nil, err
	}
	a, stop, err := consumeFrom(ctx, env.brokers, topic, end)
	if err != nil {
		return nil, err
	}
	defer stop()
	// Warm-up: one unmeasured update (row n) seen by the consumer first.
	if _, err := conn.Exec(ctx, "UPDATE lat SET v = v + 1 WHERE id = $1", n); err != nil {
		return nil, err
	}
	if _, err := collect(ctx, a, []string{"lat|" + strconv.Itoa(n)}, []time.Time{time.Now()}, 30*time.Second+10*poll); err != nil {
		return nil, err
	}
	keys := make([]string, n)
	sent := make([]time.Time, n)
	for i := range n {
		keys[i] = "lat|" + strconv.Itoa(i)
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, "UPDATE lat SET v = v + 1 WHERE id = $1", i); err != nil {
			return nil, err
		}
		sent[i] = time.Now()
		if err := tx.Commit(ctx); err != nil {
			return nil, err
		}
		time.Sleep(every)
	}
	return collect(ctx, a, keys, sent, 30*time.Second+10*poll)
}
