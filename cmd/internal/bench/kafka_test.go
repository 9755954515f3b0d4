package bench

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/record"
)

func newTestTopic(t *testing.T, brokers []string) string {
	t.Helper()
	topic, drop, err := NewTopic(brokers, "bench_test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return topic
}

// TestProducerAndConsumers writes rows with the Producer and reads them back with the
// plain consumers and an Arrivals consumer, against the real broker.
func TestProducerAndConsumers(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := newTestTopic(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cs, err := StartConsumers(brokers, topic, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	arr, err := ConsumeFrom(ctx, brokers, topic, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer arr.Close()

	p, err := NewProducer(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	sent := time.Now()
	if err := p.SendPaced(ctx, 5000, n, "v", 7, 120); err != nil {
		t.Fatalf("SendPaced: %v", err)
	}
	for off := range int64(n) {
		if _, ok := p.Acks.Get(off); !ok {
			t.Fatalf("no acknowledgement logged for offset %d", off)
		}
	}
	if end, err := EndOffset(brokers, topic); err != nil || end != n {
		t.Fatalf("EndOffset = %d, %v; want %d", end, err, n)
	}
	if !WaitFor(30*time.Second, func() bool { return AllHave(cs.Recv, n) }) {
		t.Fatalf("consumers have %d and %d records, want %d", cs.Recv[0].Count(), cs.Recv[1].Count(), n)
	}
	for _, r := range cs.Recv {
		var idx []int64
		for _, d := range r.Deliveries() {
			idx = append(idx, d.Index)
		}
		if len(idx) != n || !slices.IsSorted(idx) || idx[0] != 0 || idx[n-1] != n-1 {
			t.Errorf("%s read offsets %v, want 0..%d in order", r.ID, idx, n-1)
		}
	}
	st, ak, missing := Latencies(cs.Recv, 10, p.Acks)
	if len(st) != 2*(n-10) || len(ak) != 2*(n-10) || missing != 0 {
		t.Errorf("latencies after offset 10: %d stamped, %d acked, %d missing acks; want %d, %d, 0", len(st), len(ak), missing, 2*(n-10), 2*(n-10))
	}
	for _, d := range st {
		if d <= 0 || d > 30*time.Second {
			t.Errorf("produce → applied %v is not a plausible latency", d)
			break
		}
	}

	// Rows of view v with keys 0..6: the Arrivals consumer saw each key.
	keys := make([]string, 7)
	sentAt := make([]time.Time, 7)
	for k := range keys {
		keys[k], sentAt[k] = string(record.EncodeKey("v", strconv.Itoa(k))), sent
	}
	ds, err := arr.Collect(ctx, keys, sentAt, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 7 {
		t.Errorf("Collect returned %d latencies, want 7", len(ds))
	}
	if _, err := arr.Collect(ctx, []string{"never"}, []time.Time{sent}, 50*time.Millisecond); err == nil {
		t.Error("Collect of a key never written returned no error")
	}
}

func TestRawProducers(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	for name, produce := range map[string]func([]*sarama.ProducerMessage) (time.Duration, error){
		"sync":  func(m []*sarama.ProducerMessage) (time.Duration, error) { return ProduceSync(brokers, m, 7) },
		"async": func(m []*sarama.ProducerMessage) (time.Duration, error) { return ProduceAsync(brokers, m) },
	} {
		topic := newTestTopic(t, brokers)
		var msgs []*sarama.ProducerMessage
		for i := range 30 {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + strconv.Itoa(i)), Value: sarama.StringEncoder("{}")})
		}
		d, err := produce(msgs)
		if err != nil || d <= 0 {
			t.Fatalf("%s: %v, %v", name, d, err)
		}
		if end, err := EndOffset(brokers, topic); err != nil || end != 30 {
			t.Errorf("%s: end offset %d, %v; want 30", name, end, err)
		}
	}
}

// TestBareFromKafka feeds the bare fan-out from the real broker.
func TestBareFromKafka(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := newTestTopic(t, brokers)
	b, err := StartBare(2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stop, err := b.FeedFromKafka(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(brokers, topic)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if err := p.SendPaced(context.Background(), 5000, 20, "v", 20, 64); err != nil {
		stop()
		t.Fatal(err)
	}
	ok := WaitFor(30*time.Second, func() bool { return AllHave(b.Recv, 20) })
	dispatched := stop()
	if !ok {
		t.Fatalf("receivers have %d and %d entries, want 20", b.Recv[0].Count(), b.Recv[1].Count())
	}
	if len(dispatched) != 20 {
		t.Errorf("%d dispatch times, want 20", len(dispatched))
	}
	if spans := DispatchSpans(b.Recv, dispatched, 5); len(spans) != 2*15 {
		t.Errorf("%d dispatch spans after offset 5, want 30", len(spans))
	}
}
