package distributor

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
)

// producer sends a stream's records through one idempotent sarama SyncProducer (acks=all,
// one request in flight, lz4: internal/kafkautil.ProducerConfig), in chunks of sendBatch
// records so that sarama batches them into few produce requests. It is used by the stream's
// publisher loop only. After a send error the sarama producer is closed and re-created on
// the next send (an idempotent producer that saw an error may be unusable).
type producer struct {
	brokers   []string
	cfg       *sarama.Config
	topic     string
	sendBatch int
	p         sarama.SyncProducer
}

// send publishes msgs in order and returns when the broker acknowledged all of them.
// ctx is checked between chunks: a cancelled send returns ctx.Err() and the caller must not
// treat the records as published.
func (p *producer) send(ctx context.Context, msgs []*sarama.ProducerMessage) error {
	for len(msgs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.p == nil {
			sp, err := sarama.NewSyncProducer(p.brokers, p.cfg)
			if err != nil {
				return fmt.Errorf("distributor: producer for topic %q: %w", p.topic, err)
			}
			p.p = sp
		}
		n := min(len(msgs), p.sendBatch)
		for _, m := range msgs[:n] {
			m.Topic = p.topic
			m.Partition = 0
		}
		if err := p.p.SendMessages(msgs[:n]); err != nil {
			_ = p.p.Close()
			p.p = nil
			return fmt.Errorf("distributor: produce to topic %q: %w", p.topic, err)
		}
		msgs = msgs[n:]
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
