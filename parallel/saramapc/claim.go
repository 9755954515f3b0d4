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

// claimRun is one claimed partition, from its engine's start to its final commit. sarama's
// ConsumeClaim goroutine runs it (consumeClaim): it feeds the engine (intake) and, under
// CommitSync, commits; under the other modes a committer goroutine of its own commits
// (committer). Those two goroutines share observed (atomic), last and fenced (under mu)
// and ended (a channel); the other fields are set before the committer starts and are
// only read afterwards.
type claimRun struct {
	h         *groupHandler
	cfg       Config
	sess      sarama.ConsumerGroupSession
	claim     sarama.ConsumerGroupClaim
	topic     string
	partition int32
	name      string // "topic/partition": the engine's key in Consumer.Stats, and in logs
	eng       *parallel.Engine[Message]
	pend      *pendingOutputs // CommitTransactional: the outputs awaiting their transaction; nil otherwise
	instance  *string         // the static member id (Consumer.Group.InstanceId), nil without one

	// observed: whether there is anything to commit (a resume point or a submitted record).
	// Atomic, so that intake never waits for a commit in progress.
	observed atomic.Bool

	mu     sync.Mutex        // serializes commits; guards last and fenced
	last   parallel.Progress // what the last successful commit committed
	fenced bool              // the broker refused a transaction: the final commit is skipped

	// ended is closed (once, endOnce) when the claim must stop early: fenced, or the
	// producer failed.
	ended   chan struct{}
	endOnce sync.Once

	stopCommitter chan struct{} // closed by finish: the committer returns
	wg            sync.WaitGroup
}

// consumeClaim runs one claim on sarama's ConsumeClaim goroutine until the session ends,
// the engine stops or the claim must end early, and returns the error that ends Run (nil
// for a claim that simply ended).
func (h *groupHandler) consumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r, err := h.newClaimRun(sess, claim)
	if err != nil {
		return err
	}
	h.c.mu.Lock()
	h.c.engines[r.name] = r.eng
	h.c.mu.Unlock()
	defer func() {
		h.c.mu.Lock()
		delete(h.c.engines, r.name)
		h.c.mu.Unlock()
	}()
	if r.cfg.Commit != CommitSync {
		r.wg.Go(r.committer)
	}
	err = r.intake()
	if err == nil {
		err = r.eng.Err()
	}
	return r.finish(err)
}

// newClaimRun reads where the claim resumes and starts its engine (on sarama's
// ConsumeClaim goroutine, before anything else runs).
func (h *groupHandler) newClaimRun(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) (*claimRun, error) {
	cfg := h.c.cfg
	resume, err := h.resume(claim)
	if err != nil {
		return nil, err
	}
	r := &claimRun{
		h: h, cfg: cfg, sess: sess, claim: claim, topic: claim.Topic(), partition: claim.Partition(),
		last: parallel.Progress{Watermark: -1}, ended: make(chan struct{}), stopCommitter: make(chan struct{}),
	}
	r.name = fmt.Sprintf("%s/%d", r.topic, r.partition)
	ecfg := cfg.Engine
	ecfg.Resume = resume
	if cfg.Commit == CommitTransactional {
		pend := newPendingOutputs(cfg.MaxPendingBytes)
		r.pend = pend
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
		ecfg.DeadLetter = h.deadLetterSink(r.pend, cfg.Engine.DeadLetter)
	}
	if r.eng, err = parallel.New(ecfg); err != nil {
		return nil, err
	}
	if id := cfg.Sarama.Consumer.Group.InstanceId; id != "" {
		r.instance = &id
	}
	r.observed.Store(resume != nil)
	return r, nil
}

// intake submits the partition's messages to the engine, in offset order, and under
// CommitSync commits every CommitInterval, until the session ends, the engine stops, the
// claim is ended early (ended) or a commit or a submission fails; it returns that failure
// (nil when it stopped for another reason). It runs on sarama's ConsumeClaim goroutine.
func (r *claimRun) intake() error {
	var syncTick <-chan time.Time
	if r.cfg.Commit == CommitSync {
		t := time.NewTicker(r.cfg.CommitInterval)
		defer t.Stop()
		syncTick = t.C
	}
	ctx := r.sess.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.eng.Done():
			return nil
		case <-r.ended:
			return nil
		case <-syncTick:
			if err := r.commit(); err != nil {
				return err
			}
		case msg, ok := <-r.claim.Messages():
			if !ok {
				return nil
			}
			r.observed.Store(true)
			err := r.submit(ctx, parallel.Record[Message]{Key: msg.Key, Offset: msg.Offset, Value: msg, Size: len(msg.Key) + len(msg.Value)})
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, parallel.ErrClosed) {
					return nil
				}
				if !errors.Is(err, parallel.ErrOffsetOrder) {
					return err
				}
				// A redelivered offset (sarama never does this within a claim): skip it.
			}
		}
	}
}

// submit hands rec to the engine. Under CommitSync a Submit blocked for a whole
// CommitInterval gives way to a commit, so commits stay periodic when intake is full. It
// runs on sarama's ConsumeClaim goroutine (intake).
func (r *claimRun) submit(ctx context.Context, rec parallel.Record[Message]) error {
	if r.cfg.Commit != CommitSync {
		return r.eng.Submit(ctx, rec)
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, r.cfg.CommitInterval)
		err := r.eng.Submit(sctx, rec)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		if err := r.commit(); err != nil {
			return err
		}
	}
}

// finish ends the claim, whose intake ended with runErr (its failure or the engine's
// error; nil for neither): it shuts the engine down (drained when Run is closing with
// Config.Drain and nothing failed, else within RevokeTimeout), stops the committer and
// commits the final progress unless the claim was fenced. It returns the claim's error:
// runErr, or under CommitSync a failed final commit. It runs on sarama's ConsumeClaim
// goroutine.
func (r *claimRun) finish(runErr error) error {
	mode, timeout := parallel.NoDrain, r.cfg.RevokeTimeout
	if r.cfg.Drain && r.h.c.closing() && runErr == nil {
		mode, timeout = parallel.Drain, r.cfg.DrainTimeout
	}
	if r.pend != nil && mode == parallel.NoDrain {
		r.pend.close() // handlers waiting for room give up: their records run again later
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := r.eng.Shutdown(sctx, mode); err != nil {
		r.h.c.log.Warn("saramapc: claim shutdown", "partition", r.name, "err", err)
	}
	cancel()
	if r.pend != nil {
		r.pend.close()
	}
	close(r.stopCommitter)
	r.wg.Wait()
	r.mu.Lock()
	skip := r.fenced
	r.mu.Unlock()
	if !skip {
		if err := r.commit(); err != nil {
			if r.cfg.Commit == CommitSync && runErr == nil {
				runErr = err
			} else {
				// Not fatal: the next owner reprocesses from the last successful commit.
				r.handleCommitErr(err, "final commit")
			}
		}
	}
	return runErr
}
