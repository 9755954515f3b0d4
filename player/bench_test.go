package player

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// BenchmarkFanout: 20 targets (all views) subscribed at the head; b.N entries of 1 KB are
// produced; the time is from the first produce to the last entry applied by the last
// target. The producer alone (same entries, separate topic) is reported beside as
// "producer-s" (the baseline: the player cannot be faster than the log fills).
func BenchmarkFanout(b *testing.B) {
	const targets, size = 20, 1024
	brokers := testenv.KafkaBrokers(b)
	produceAll := func(topic string, n int) time.Duration {
		prod, err := sarama.NewAsyncProducer(brokers, kafkaconn.ProducerConfig("bench"))
		if err != nil {
			b.Fatal(err)
		}
		defer prod.Close()
		val := make([]byte, size)
		start := time.Now()
		go func() {
			for i := range n {
				k := record.EncodeKey("a", fmt.Sprint(i%1000))
				prod.Input() <- recordsarama.ProducerMessage(topic, k, val, record.Meta{View: "a", Kind: record.KindRow, Epoch: 1, SourceTime: start})
			}
		}()
		for range n {
			select {
			case <-prod.Successes():
			case err := <-prod.Errors():
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	base := produceAll(testenv.NewTopic(b, "bench", nil), b.N)

	e := &env{t: nil, brokers: brokers, topic: testenv.NewTopic(b, "bench", nil), last: -1}
	tp := startPlayerB(b, e)
	var clients []*client
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range targets {
		c := newClient(fmt.Sprint("t", i), nopChecker(), []string{}...)
		c.batch = 512
		clients = append(clients, c)
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.session(ctx, tp.addr, 0, nil) }()
	}
	if !poll(30*time.Second, func() bool { return len(tp.p.Status().Streams[0].Targets) == targets }) {
		b.Fatal("targets not admitted")
	}
	for _, c := range clients {
		if !poll(30*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState }) {
			b.Fatal("no snapshot")
		}
	}
	b.ResetTimer()
	start := time.Now()
	produceAll(e.topic, b.N)
	last := int64(b.N - 1)
	for _, c := range clients {
		if !poll(5*time.Minute, func() bool { return c.Applied() >= last }) {
			b.Fatal("not delivered")
		}
	}
	d := time.Since(start)
	b.StopTimer()
	b.ReportMetric(base.Seconds(), "producer-s")
	b.ReportMetric(d.Seconds(), "player-s")
	b.ReportMetric(float64(b.N*targets)/d.Seconds(), "deliveries/s")
	cancel()
	wg.Wait()
	tp.stop()
}
