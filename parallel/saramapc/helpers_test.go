package saramapc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// produce writes key=value records and returns their offsets.
func produce(t *testing.T, brokers []string, topic string, kvs ...string) []int64 {
	t.Helper()
	return produceHeaders(t, brokers, topic, nil, kvs...)
}

// produceHeaders is produce with headers on every record.
func produceHeaders(t *testing.T, brokers []string, topic string, headers []sarama.RecordHeader, kvs ...string) []int64 {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("saramapc-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var offs []int64
	for i := 0; i < len(kvs); i += 2 {
		_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(kvs[i]), Value: sarama.StringEncoder(kvs[i+1]), Headers: headers})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	return offs
}

func keyed(n int, keys int, prefix string) []string {
	var kvs []string
	for i := range n {
		kvs = append(kvs, fmt.Sprintf("k%d", i%keys), fmt.Sprintf("%s%d", prefix, i))
	}
	return kvs
}

// recorder is a handler that records processed offsets.
type recorder struct {
	mu    sync.Mutex
	count map[int64]int
	order map[string][]int64
}

func newRecorder() *recorder {
	return &recorder{count: map[int64]int{}, order: map[string][]int64{}}
}

func (r *recorder) add(m Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[m.Offset]++
	r.order[string(m.Key)] = append(r.order[string(m.Key)], m.Offset)
}

func (r *recorder) processed() map[int64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]int, len(r.count))
	for k, v := range r.count {
		out[k] = v
	}
	return out
}

func (r *recorder) checkKeyOrder(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, offs := range r.order {
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] {
				t.Errorf("ordered: key %s processed %d after %d", k, offs[i], offs[i-1])
			}
		}
	}
}

func testConfig(brokers []string, group, topic string, h parallel.Handler[Message]) Config {
	sc := kafkaconn.NewConfig("saramapc-test")
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Group.Session.Timeout = 10 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = time.Second
	return Config{
		Brokers:        brokers,
		Group:          group,
		Topics:         []string{topic},
		Sarama:         sc,
		CommitInterval: 100 * time.Millisecond,
		Engine:         parallel.Config[Message]{Handler: h, MaxConcurrency: 8},
	}
}

// start runs a consumer until the test ends or stop is called; stop returns Run's error.
func start(t *testing.T, cfg Config, opts ...Option) (c *Consumer, stop func() error) {
	t.Helper()
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-errc
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return c, stop
}

func newClient(t *testing.T, brokers []string) sarama.Client {
	t.Helper()
	cl, err := sarama.NewClient(brokers, kafkaconn.NewConfig("saramapc-test-admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// waitCommitted polls the committed checkpoint until cond holds.
func waitCommitted(t *testing.T, cl sarama.Client, group, topic string, what string, cond func(parallel.Checkpoint) bool) parallel.Checkpoint {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp, err := FetchCheckpoint(cl, group, topic, 0)
		if err == nil && cond(cp) {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for committed %s (last %+v, err %v)", what, cp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = testenv.KafkaBrokers
