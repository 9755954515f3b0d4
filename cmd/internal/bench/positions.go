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

// PositionWatch samples a stream's topic's last stable offset every 2 ms and, at each new
// one, reads the record just before the commit marker that ends the topic there: when it
// is a position record at or past a source position, the last record of the source
// transactions up to it became readable in Kafka at that sample. It reads one record per
// committed transaction, not the transactions' records, so that it does not compete
// with the player and the cacheclient beside it for the CPU.
type PositionWatch struct {
	client sarama.Client
	cons   sarama.Consumer
	topic  string
	start  int64 // the last stable offset when the watch started
}

// WatchPositions starts a watch of topic's new records.
func WatchPositions(brokers []string, topic string) (*PositionWatch, error) {
	cfg := kafkaconn.NewConfig(clientID)
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cl, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	p := &PositionWatch{client: cl, cons: cons, topic: topic}
	if p.start, err = p.lso(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// lso is the topic's last stable offset: what a read_committed reader reads up to.
func (p *PositionWatch) lso() (int64, error) {
	b, err := p.client.Leader(p.topic, 0)
	if err != nil {
		return 0, err
	}
	req := sarama.NewOffsetRequest(p.client.Config().Version)
	req.IsolationLevel = sarama.ReadCommitted
	req.AddBlock(p.topic, 0, sarama.OffsetNewest, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		return 0, err
	}
	blk := resp.GetBlock(p.topic, 0)
	if blk == nil {
		return 0, fmt.Errorf("bench: no offset of %s", p.topic)
	}
	if blk.Err != sarama.ErrNoError {
		return 0, blk.Err
	}
	return blk.Offset, nil
}

// Wait returns when a position record at or past lsn became readable in Kafka, and its
// offset.
func (p *PositionWatch) Wait(ctx context.Context, lsn cacheclient.LSN) (time.Time, int64, error) {
	last := p.start
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		case <-t.C:
		}
		l, err := p.lso()
		if err != nil || l == last {
			continue
		}
		at := time.Now()
		last = l
		// A transaction ends with its commit marker at l-1; its last record is at l-2.
		ok, err := p.positionAt(ctx, l-2, lsn)
		if err != nil {
			return time.Time{}, 0, err
		}
		if ok {
			return at, l - 2, nil
		}
	}
}

// positionAt reports whether the record at offset is a position record at or past lsn.
func (p *PositionWatch) positionAt(ctx context.Context, offset int64, lsn cacheclient.LSN) (bool, error) {
	if offset < p.start {
		return false, nil
	}
	pc, err := p.cons.ConsumePartition(p.topic, 0, offset)
	if err != nil {
		return false, err
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if m.Offset != offset || !bytes.Equal(m.Key, record.ControlKey("", record.KindPosition)) {
			return false, nil
		}
		pos, err := record.ParsePosition(m.Value)
		if err != nil {
			return false, err
		}
		at, err := cacheclient.ParseLSN(pos.LSN)
		return err == nil && at >= lsn, err
	case err := <-pc.Errors():
		return false, fmt.Errorf("bench: position watch: %w", err)
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(5 * time.Second):
		return false, nil
	}
}

// Close stops the watch.
func (p *PositionWatch) Close() {
	_ = p.cons.Close()
	_ = p.client.Close()
}
