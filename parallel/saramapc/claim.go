package saramapc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/parallel"
)

// resume decides what the claim skips: the committed metadata, if it belongs to the offset
// the claim starts from.
func (h *groupHandler) resume(claim sarama.ConsumerGroupClaim) (*parallel.Checkpoint, error) {
	log := h.c.log.With("topic", claim.Topic(), "partition", claim.Partition())
	off, meta, err := h.coord.Fetch(claim.Topic(), claim.Partition())
	if err != nil {
		return nil, err
	}
	start := claim.InitialOffset()
	if off < 0 || start < 0 {
		return nil, nil
	}
	if off != start {
		// sarama reset an out-of-range committed offset per Consumer.Offsets.Initial.
		log.Warn("saramapc: committed offset out of range, reset", "committed", off, "start", start)
		return &parallel.Checkpoint{Watermark: start}, nil
	}
	cp, err := parallel.DecodeCheckpoint(off, meta)
	if err != nil {
		if h.c.cfg.InvalidMetadata == MetadataIgnore {
			log.Warn("saramapc: ignoring committed metadata", "err", err)
			return &parallel.Checkpoint{Watermark: off}, nil
		}
		return nil, err
	}
	return &cp, nil
}

func (h *groupHandler) consumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	cfg := h.c.cfg
	topic, partition := claim.Topic(), claim.Partition()
	resume, err := h.resume(claim)
	if err != nil {
		return err
	}
	ecfg := cfg.Engine
	ecfg.Resume = resume
	eng, err := parallel.New(ecfg)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s/%d", topic, partition)
	h.c.mu.Lock()
	h.c.engines[name] = eng
	h.c.mu.Unlock()
	defer func() {
		h.c.mu.Lock()
		delete(h.c.engines, name)
		h.c.mu.Unlock()
	}()

	// observed: whether there is anything to commit (a resume point or a submitted record).
	var mu sync.Mutex
	last := parallel.Progress{Watermark: -1}
	observed := resume != nil
	commit := func() error {
		mu.Lock()
		defer mu.Unlock()
		if !observed {
			return nil
		}
		p := eng.Progress()
		if p.Watermark == last.Watermark && p.Metadata == last.Metadata {
			return nil
		}
		if err := h.coord.Commit(sess.GenerationID(), sess.MemberID(), topic, partition, p); err != nil {
			return err
		}
		last = p
		return nil
	}

	stopCommitter := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cfg.CommitInterval)
		defer t.Stop()
		for {
			select {
			case <-stopCommitter:
				return
			case <-t.C:
				if err := commit(); err != nil {
					h.c.log.Warn("saramapc: periodic commit", "partition", name, "err", err)
				}
			}
		}
	})

	var runErr error
	ctx := sess.Context()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-eng.Done():
			break loop
		case msg, ok := <-claim.Messages():
			if !ok {
				break loop
			}
			mu.Lock()
			observed = true
			mu.Unlock()
			err := eng.Submit(ctx, parallel.Record[Message]{Key: msg.Key, Offset: msg.Offset, Value: msg, Size: len(msg.Key) + len(msg.Value)})
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, parallel.ErrClosed) {
					break loop
				}
				if !errors.Is(err, parallel.ErrOffsetOrder) {
					runErr = err
					break loop
				}
				// A redelivered offset (sarama never does this within a claim): skip it.
			}
		}
	}
	if runErr == nil {
		runErr = eng.Err()
	}

	mode, timeout := parallel.NoDrain, cfg.RevokeTimeout
	if cfg.Drain && h.c.closing() && runErr == nil {
		mode, timeout = parallel.Drain, cfg.DrainTimeout
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := eng.Shutdown(sctx, mode); err != nil {
		h.c.log.Warn("saramapc: claim shutdown", "partition", name, "err", err)
	}
	cancel()
	close(stopCommitter)
	wg.Wait()
	if err := commit(); err != nil {
		// Not fatal: the next owner reprocesses from the last successful commit.
		h.c.log.Warn("saramapc: final commit", "partition", name, "err", err)
	}
	return runErr
}
