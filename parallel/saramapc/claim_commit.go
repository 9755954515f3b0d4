package saramapc

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// commit commits the engine's progress when it changed since the last successful commit:
// a transaction with the outputs it marks complete under CommitTransactional, an offset
// commit otherwise. Commits are serialized (mu). It runs on the committer goroutine and on
// sarama's ConsumeClaim goroutine (CommitSync's commits, the final one).
func (r *claimRun) commit() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.observed.Load() {
		return nil
	}
	p := r.eng.Progress()
	if p.Watermark == r.last.Watermark && p.Metadata == r.last.Metadata {
		return nil
	}
	var err error
	outputs := 0
	if r.pend != nil {
		// The member on whose behalf the transaction commits, read for each one (a
		// cooperative rebalance moves a retained claim to a new generation): the broker
		// refuses a transaction of an older generation (KIP-447), so an instance that
		// lost the partition cannot commit.
		gm := sarama.NewConsumerGroupMetadataFromSession(r.sess, r.cfg.Group, r.instance)
		outputs, err = r.h.txn.commitTxn(r.pend, gm, r.topic, r.partition, p)
		var fatal *fatalProducerError
		if errors.Is(err, ErrFenced) && !errors.As(err, &fatal) &&
			(r.sess.GenerationID() != gm.GenerationID || r.sess.MemberID() != gm.MemberID) {
			// The session moved on during the transaction: retry with the new one.
			err = fmt.Errorf("saramapc: generation changed during the transaction, retrying: %v", err)
		}
	} else {
		err = r.h.coord.Commit(r.sess.GenerationID(), r.sess.MemberID(), r.topic, r.partition, p)
	}
	r.h.c.committed(r.topic, r.partition, p, outputs, err)
	if err != nil {
		return err
	}
	r.last = p
	return nil
}

// handleCommitErr deals with a failed commit (what names it in the log) and reports
// whether the claim may go on: a producer failure ends Run, a fenced claim is marked
// (the final commit is skipped) and ended, anything else is logged and retried by the next
// commit. It runs on the committer goroutine and, for the final commit, on sarama's
// ConsumeClaim goroutine.
func (r *claimRun) handleCommitErr(err error, what string) bool {
	var fe *fatalProducerError
	switch {
	case errors.As(err, &fe):
		r.h.c.fail(err)
	case errors.Is(err, ErrFenced):
		r.h.c.log.Warn("saramapc: claim fenced, ending it", "partition", r.name, "err", err)
		r.mu.Lock()
		r.fenced = true
		r.mu.Unlock()
	default:
		r.h.c.log.Warn("saramapc: "+what, "partition", r.name, "err", err)
		return true
	}
	r.endOnce.Do(func() { close(r.ended) })
	return false
}

// committer is the committer goroutine of CommitAsync and CommitTransactional: it commits
// every CommitInterval, and under CommitTransactional also when the pending outputs ask
// for an early commit (pendingOutputs.kick), until stopCommitter is closed or a commit
// error ends the claim.
func (r *claimRun) committer() {
	var kick <-chan struct{} // nil outside CommitTransactional: never ready
	if r.pend != nil {
		kick = r.pend.kick
	}
	t := time.NewTicker(r.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stopCommitter:
			return
		case <-t.C:
		case <-kick:
		}
		if err := r.commit(); err != nil {
			if !r.handleCommitErr(err, "periodic commit") {
				return
			}
			if r.pend != nil && r.pend.pressure.Load() {
				// Handlers may be waiting for room: retry soon, not at the next tick.
				time.AfterFunc(100*time.Millisecond, r.pend.completed)
			}
		}
	}
}
