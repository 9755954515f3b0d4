package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// PositionWatch reads a stream's topic read_committed, from the end it had when the watch
// started, for the position record that reaches a source position, and samples the
// topic's last stable offset every 2 ms: the moment that offset passed the position
// record is when the last record of the source transactions up to it became readable in
// Kafka (the consumer that finds the record may read a large transaction later than that).
type PositionWatch struct {
	client sarama.Client
	pc     sarama.PartitionConsumer
	cons   sarama.Consumer

	mu      sync.Mutex
	samples []lsoSample
	quit    chan struct{}
	wg      sync.WaitGroup
}

type lsoSample struct {
	at  time.Time
	lso int64
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
	p := &PositionWatch{client: cl, pc: pc, cons: cons, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.sample(topic)
	return p, nil
}

// sample records the last stable offset until Close.
func (p *PositionWatch) sample(topic string) {
	defer p.wg.Done()
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		b, err := p.client.Leader(topic, 0)
		if err != nil {
			continue
		}
		req := sarama.NewOffsetRequest(p.client.Config().Version)
		req.IsolationLevel = sarama.ReadCommitted
		req.AddBlock(topic, 0, sarama.OffsetNewest, 1)
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			continue
		}
		if blk := resp.GetBlock(topic, 0); blk != nil && blk.Err == sarama.ErrNoError {
			at := time.Now()
			p.mu.Lock()
			if n := len(p.samples); n == 0 || p.samples[n-1].lso != blk.Offset {
				p.samples = append(p.samples, lsoSample{at, blk.Offset})
			}
			p.mu.Unlock()
		}
	}
}

// readable returns when the last stable offset first passed offset.
func (p *PositionWatch) readable(offset int64) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.samples {
		if s.lso > offset {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// Wait returns when the first position record at or past lsn became readable in Kafka,
// and the number of records read before it.
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
			if at < lsn {
				continue
			}
			for {
				if t, ok := p.readable(m.Offset); ok {
					return t, n, nil
				}
				select {
				case <-ctx.Done():
					return time.Time{}, n, ctx.Err()
				case <-time.After(2 * time.Millisecond):
				}
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
	close(p.quit)
	p.wg.Wait()
	_ = p.pc.Close()
	_ = p.cons.Close()
	_ = p.client.Close()
}
