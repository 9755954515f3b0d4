package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// PositionWatch reads a stream's topic read_committed, from the end it had when the watch
// started, and notes when a position record reached a source position: the moment the
// last record of the source transactions up to it is readable in Kafka.
type PositionWatch struct {
	client sarama.Client
	pc     sarama.PartitionConsumer
	cons   sarama.Consumer
}

// WatchPositions starts a watch of topic's new records.
func WatchPositions(brokers []string, topic string) (*PositionWatch, error) {
	cfg := kafkaconn.NewConfig(clientID)
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cl, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	end, err := cl.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		cl.Close()
		return nil, err
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	pc, err := cons.ConsumePartition(topic, 0, end)
	if err != nil {
		cons.Close()
		cl.Close()
		return nil, err
	}
	return &PositionWatch{client: cl, pc: pc, cons: cons}, nil
}

// Wait returns when the first position record at or past lsn was read, and the number
// of records read before it.
func (p *PositionWatch) Wait(ctx context.Context, lsn cacheclient.LSN) (time.Time, int64, error) {
	key := record.ControlKey("", record.KindPosition)
	var n int64
	for {
		select {
		case m := <-p.pc.Messages():
			if !bytes.Equal(m.Key, key) {
				n++
				continue
			}
			pos, err := record.ParsePosition(m.Value)
			if err != nil {
				return time.Time{}, n, err
			}
			at, err := cacheclient.ParseLSN(pos.LSN)
			if err != nil {
				return time.Time{}, n, err
			}
			if at >= lsn {
				return time.Now(), n, nil
			}
		case err := <-p.pc.Errors():
			return time.Time{}, n, fmt.Errorf("bench: position watch: %w", err)
		case <-ctx.Done():
			return time.Time{}, n, ctx.Err()
		}
	}
}

// Close stops the watch.
func (p *PositionWatch) Close() {
	_ = p.pc.Close()
	_ = p.cons.Close()
	_ = p.client.Close()
}
