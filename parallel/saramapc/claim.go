package saramapc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	var pend *pendingOutputs
	if cfg.Commit == CommitTransactional {
		pend = newPendingOutputs(cfg.MaxPendingBytes)
		ecfg.Handler = h.c.txnHandler(pend)
		userHook := ecfg.Hooks.OnComplete
		ecfg.Hooks.OnComplete = func(offset int64, attempts int, failed bool) {
			pend.completed()
			if userHook != nil {
				userHook(offset, attempts, failed)
			}
		}
	}
	if cfg.DeadLetterTopic != "" {
		ecfg.DeadLetter = h.deadLetterSink(pend, cfg.Engine.DeadLetter)
	}
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

	var instance *string
	if id := cfg.Sarama.Consumer.Group.InstanceId; id != "" {
		instance = &id
	}

	// observed: whether there is anything to commit (a resume point or a submitted record).
	// Atomic, so that intake never waits for a commit in progress.
	var observed atomic.Bool
	observed.Store(resume != nil)
	var mu sync.Mutex // serializes commits; guards last and fenced
	last := parallel.Progress{Watermark: -1}
	commit := func() error {
		mu.Lock()
		defer mu.Unlock()
		if !observed.Load() {
			return nil
		}
		p := eng.Progress()
		if p.Watermark == last.Watermark && p.Metadata == last.Metadata {
			return nil
		}
		var err error
		outputs := 0
		if pend != nil {
			// The member on whose behalf the transaction commits, read for each one (a
			// cooperative rebalance moves a retained claim to a new generation): the broker
			// refuses a transaction of an older generation (KIP-447), so an instance that
			// lost the partition cannot commit.
			gm := sarama.NewConsumerGroupMetadataFromSession(sess, cfg.Group, instance)
			outputs, err = h.txn.commitTxn(pend, gm, topic, partition, p)
			var fatal *fatalProducerError
			if errors.Is(err, ErrFenced) && !errors.As(err, &fatal) &&
				(sess.GenerationID() != gm.GenerationID || sess.MemberID() != gm.MemberID) {
				// The session moved on during the transaction: retry with the new one.
				err = fmt.Errorf("saramapc: generation changed during the transaction, retrying: %v", err)
			}
		} else {
			err = h.coord.Commit(sess.GenerationID(), sess.MemberID(), topic, partition, p)
		}
		h.c.committed(topic, partition, p, outputs, err)
		if err != nil {
			return err
		}
		last = p
		return nil
	}

	// ended is closed when the claim must stop early: fenced, or the producer failed.
	ended := make(chan struct{})
	var endOnce sync.Once
	var fenced bool
	// handleCommitErr reports whether the claim may go on after a failed commit.
	handleCommitErr := func(err error, what string) bool {
		var fe *fatalProducerError
		switch {
		case errors.As(err, &fe):
			h.c.fail(err)
		case errors.Is(err, ErrFenced):
			h.c.log.Warn("saramapc: claim fenced, ending it", "partition", name, "err", err)
			mu.Lock()
			fenced = true
			mu.Unlock()
		default:
			h.c.log.Warn("saramapc: "+what, "partition", name, "err", err)
			return true
		}
		endOnce.Do(func() { close(ended) })
		return false
	}

	stopCommitter := make(chan struct{})
	var wg sync.WaitGroup
	if cfg.Commit != CommitSync {
		var kick <-chan struct{}
		if pend != nil {
			kick = pend.kick
		}
		wg.Go(func() {
			t := time.NewTicker(cfg.CommitInterval)
			defer t.Stop()
			for {
				select {
				case <-stopCommitter:
					return
				case <-t.C:
				case <-kick:
				}
				if err := commit(); err != nil {
					if !handleCommitErr(err, "periodic commit") {
						return
					}
					if pend != nil && pend.pressure.Load() {
						// Handlers may be waiting for room: retry soon, not at the next tick.
						time.AfterFunc(100*time.Millisecond, pend.completed)
					}
				}
			}
		})
	}

	// submit hands msg to the engine. Under CommitSync a Submit blocked for a whole
	// CommitInterval gives way to a commit, so commits stay periodic when intake is full.
	submit := func(ctx context.Context, rec parallel.Record[Message]) error {
		if cfg.Commit != CommitSync {
			return eng.Submit(ctx, rec)
		}
		for {
			sctx, cancel := context.WithTimeout(ctx, cfg.CommitInterval)
			err := eng.Submit(sctx, rec)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				return err
			}
			if err := commit(); err != nil {
				return err
			}
		}
	}
	var syncTick <-chan time.Time
	if cfg.Commit == CommitSync {
		t := time.NewTicker(cfg.CommitInterval)
		defer t.Stop()
		syncTick = t.C
	}

	var runErr error
	ctx := sess.Context()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-eng.Done():
			break loop
		case <-ended:
			break loop
		case <-syncTick:
			if err := commit(); err != nil {
				runErr = err
				break loop
			}
		case msg, ok := <-claim.Messages():
			if !ok {
				break loop
			}
			observed.Store(true)
			err := submit(ctx, parallel.Record[Message]{Key: msg.Key, Offset: msg.Offset, Value: msg, Size: len(msg.Key) + len(msg.Value)})
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
	if pend != nil && mode == parallel.NoDrain {
		pend.close() // handlers waiting for room give up: their records run again later
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := eng.Shutdown(sctx, mode); err != nil {
		h.c.log.Warn("saramapc: claim shutdown", "partition", name, "err", err)
	}
	cancel()
	if pend != nil {
		pend.close()
	}
	close(stopCommitter)
	wg.Wait()
	mu.Lock()
	skip := fenced
	mu.Unlock()
	if !skip {
		if err := commit(); err != nil {
			if cfg.Commit == CommitSync && runErr == nil {
				runErr = err
			} else {
				// Not fatal: the next owner reprocesses from the last successful commit.
				handleCommitErr(err, "final commit")
			}
		}
	}
	return runErr
}
