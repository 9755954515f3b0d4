package distributor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// BenchmarkCommitLatency measures the time from a PostgreSQL commit to the changed row
// being readable in Kafka (a tailing sarama consumer sees it), for 200 sequential commits:
//
//   - wal:     capture: wal (the default): the commit reaches the distributor from the slot;
//   - listen:  polling, poll_interval 10s, a trigger NOTIFYs the view's channel (the
//     wake-up path);
//   - poll100: polling without LISTEN, poll_interval 100ms (the baseline). Each commit
//     follows the poll that published the previous one, so it waits about one interval.
//
// Run: go test -run '^$' -bench BenchmarkCommitLatency -benchtime 1x ./distributor/
func BenchmarkCommitLatency(b *testing.B) {
	for _, tc := range []struct {
		name     string
		wal      bool
		listen   string
		interval time.Duration
	}{
		{"wal", true, "", 0},
		{"listen", false, "items_changed", 10 * time.Second},
		{"poll100", false, "", 100 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				commitLatency(b, tc.wal, tc.listen, tc.interval)
			}
		})
	}
}

func commitLatency(b *testing.B, wal bool, listen string, interval time.Duration) {
	e := newBenchEnv(b)
	e.topic = fmt.Sprintf("lat_%d", time.Now().UnixNano())
	deleteTopicLater(b, e.brokers, e.topic)
	e.exec(`CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2),
		updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	e.exec(`CREATE FUNCTION notify_items() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_notify('items_changed', ''); RETURN NULL; END $$`)
	e.exec(`CREATE TRIGGER items_notify AFTER INSERT OR UPDATE ON items FOR EACH STATEMENT EXECUTE FUNCTION notify_items()`)
	v := ViewConfig{Name: "items", SQL: itemsSQL, Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "updated_at",
		PollInterval: interval, Overlap: Overlap{Duration: time.Second, set: true}, Listen: listen}}
	cfg := e.config(v)
	if wal {
		cfg = e.walConfig(ViewConfig{Name: "items", SQL: itemsSQL, Key: []string{"id"}})
	}
	d, err := New(cfg, WithLogger(testLogger(b)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	if err := d.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	rcfg := kafkaconn.NewConfig("lat-reader")
	rcfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	c, err := sarama.NewConsumer(e.brokers, rcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(e.topic, 0, sarama.OffsetNewest)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	time.Sleep(300 * time.Millisecond) // let the LISTEN connection and the consumer settle
	const n = 200
	lat := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		want := "items|" + strconv.Itoa(i)
		e.exec(`INSERT INTO items (id, name) VALUES ($1, 'x')`, i)
		committed := time.Now()
		for seen := false; !seen; {
			select {
			case m := <-pc.Messages():
				seen = string(m.Key) == want
			case <-time.After(30 * time.Second):
				b.Fatalf("row %d not seen", i)
			}
		}
		lat = append(lat, time.Since(committed))
		time.Sleep(time.Duration(i%7) * time.Millisecond) // de-phase from the poll timer
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.ReportMetric(float64(q(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	b.Logf("listen=%q poll_interval=%v commits=%d  p50=%v p90=%v p99=%v max=%v", listen, interval, n,
		q(0.5).Round(100*time.Microsecond), q(0.9).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
}
