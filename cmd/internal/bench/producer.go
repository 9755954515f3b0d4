package bench

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// AckLog records when the producer got the acknowledgement of each offset.
type AckLog struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (a *AckLog) set(off int64, t time.Time) {
	a.mu.Lock()
	a.at[off] = t
	a.mu.Unlock()
}

// Get returns when offset off was acknowledged.
func (a *AckLog) Get(off int64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[off]
	return t, ok
}

// Producer writes statecast rows (all five headers) with the idempotent, ordered settings
// of the distributor, asynchronously, and logs the acknowledgement time per offset.
type Producer struct {
	Acks  *AckLog
	ap    sarama.AsyncProducer
	topic string
	done  chan struct{}
	err   error // first error; read after done is closed
	meta  record.Meta
}

// NewProducer starts a producer to partition 0 of topic.
func NewProducer(brokers []string, topic string) (*Producer, error) {
	cfg := kafkaconn.ProducerConfig(clientID + "-producer")
	// Send as soon as a batch can go: the latency benchmarks time each record.
	cfg.Producer.Flush.Frequency = 0
	ap, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return nil, err
	}
	p := &Producer{ap: ap, topic: topic, Acks: &AckLog{at: map[int64]time.Time{}}, done: make(chan struct{}),
		meta: record.Meta{Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/0"}}
	go func() {
		defer close(p.done)
		succ, errs := ap.Successes(), ap.Errors()
		for succ != nil || errs != nil {
			select {
			case m, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				p.Acks.set(m.Offset, time.Now())
			case e, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				if p.err == nil {
					p.err = e.Err
				}
			}
		}
	}()
	return p, nil
}

// Send queues one row of view with key k and a payload of size bytes stamped now.
func (p *Producer) Send(view string, k int, size int) {
	m := p.meta
	m.View = view
	p.ap.Input() <- recordsarama.ProducerMessage(p.topic, record.EncodeKey(view, strconv.Itoa(k)), Payload(size, time.Now()), m)
}

// SendRow sends one row of view with key key and value value.
func (p *Producer) SendRow(view, key string, value []byte) {
	m := p.meta
	m.View = view
	p.ap.Input() <- recordsarama.ProducerMessage(p.topic, record.EncodeKey(view, key), value, m)
}

// SendPaced sends total rows of view at rate per second (Pace), row i with key i mod
// keys, then closes the producer and returns its first error.
func (p *Producer) SendPaced(ctx context.Context, rate, total int, view string, keys, size int) error {
	Pace(ctx, rate, func(i int) bool {
		if i >= total {
			return false
		}
		p.Send(view, i%keys, size)
		return true
	})
	return p.Close()
}

// Close flushes and stops the producer and returns its first error.
func (p *Producer) Close() error {
	p.ap.AsyncClose()
	<-p.done
	return p.err
}

// ProduceSync sends msgs with a SyncProducer (the distributor's settings) in chunks of
// chunk records and returns the time from the first send to the last acknowledgement.
func ProduceSync(brokers []string, msgs []*sarama.ProducerMessage, chunk int) (time.Duration, error) {
	p, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig(clientID))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < len(msgs); i += chunk {
		if err := p.SendMessages(msgs[i:min(len(msgs), i+chunk)]); err != nil {
			_ = p.Close()
			return 0, err
		}
	}
	d := time.Since(start)
	return d, p.Close()
}

// ProduceAsync feeds msgs continuously to an AsyncProducer (the distributor's settings;
// sarama's best case) and returns the time from the first send to the last
// acknowledgement.
func ProduceAsync(brokers []string, msgs []*sarama.ProducerMessage) (time.Duration, error) {
	p, err := sarama.NewAsyncProducer(brokers, kafkaconn.ProducerConfig(clientID))
	if err != nil {
		return 0, err
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
	return d, err
}
