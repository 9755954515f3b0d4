package distributor

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/IBM/sarama"
)

// producer sends a stream's records through one idempotent sarama AsyncProducer (acks=all,
// one request in flight, lz4: kafkaconn.ProducerConfig). Records are fed as a
// continuous pipeline (no stall between batches) while a goroutine counts the broker's
// acknowledgements; idempotence with one request in flight keeps them in order. It is used
// by the stream's publisher loop only (one send at a time). After a send error the sarama
// producer is closed and re-created on the next send (an idempotent producer that saw an
// error may be unusable).
type producer struct {
	brokers []string
	cfg     *sarama.Config
	topic   string
	p       sarama.AsyncProducer
}

// sendIter publishes the messages next returns, in order, until it returns nil, and returns
// when the broker acknowledged all of them, or the first error. Feeding overlaps with
// sarama's batching, compression and the broker's writes.
// When next fails, feeding stops, the records already fed are flushed and next's error is
// returned. When ctx ends, feeding stops, the records already fed are flushed (waited for)
// and ctx.Err() is returned: the caller must not treat the send as complete.
func (p *producer) sendIter(ctx context.Context, next func() (*sarama.ProducerMessage, error)) error {
	m, err := next()
	if err != nil || m == nil {
		return err
	}
	if p.p == nil {
		ap, err := sarama.NewAsyncProducer(p.brokers, p.cfg)
		if err != nil {
			return fmt.Errorf("distributor: producer for topic %q: %w", p.topic, err)
		}
		p.p = ap
	}
	ap := p.p
	var failed atomic.Bool
	fed := make(chan int, 1)
	result := make(chan error, 1)
	go func() {
		var first error
		got, total := 0, -1
		fedc := fed
		for total < 0 || got < total {
			select {
			case <-ap.Successes():
				got++
			case perr := <-ap.Errors():
				got++
				if first == nil {
					first = perr.Err
					failed.Store(true)
				}
			case total = <-fedc:
				fedc = nil
			}
		}
		result <- first
	}()
	i := 0
	var genErr error
	for m != nil && !failed.Load() && ctx.Err() == nil {
		m.Topic = p.topic
		m.Partition = 0
		ap.Input() <- m
		i++
		if m, genErr = next(); genErr != nil {
			break
		}
	}
	fed <- i
	err = <-result
	if err != nil {
		_ = p.p.Close()
		p.p = nil
		return fmt.Errorf("distributor: produce to topic %q: %w", p.topic, err)
	}
	if genErr != nil {
		return genErr
	}
	if m != nil {
		return ctx.Err()
	}
	return nil
}

// Close flushes and closes the sarama producer.
func (p *producer) Close() error {
	if p.p == nil {
		return nil
	}
	err := p.p.Close()
	p.p = nil
	return err
}
