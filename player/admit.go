package player

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// admit decides how the target starts (Algorithm 5, target recovery) and registers it with
// the dispatcher atomically with the main position ci (under s.mu), so that every entry
// after ci goes to its normal queue and every entry up to ci comes from a recovery
// fetcher:
//
//   - no resume index: a snapshot bootstrap at ci, in RF;
//   - a resume index below the log start, at or past the log end, or followed by records
//     older than the tombstone horizon: ResyncRequired, then the snapshot, in RF;
//   - a resume index >= ci: straight to N;
//   - else: a recovery of [resume+1, ci], in RF.
//
// sels are the target's selections (selectionsOf; nil: every view whole). The target gets
// a new term; an earlier connection of the same instance (the same
// principal and instance id) is suspended, logged and counted as a replacement.
func (s *stream) admit(id identity, h *statecastv1.Hello, sels map[string]*selection) (*target, error) {
	logStart, logEnd, err := s.offsets()
	if err != nil {
		return nil, s.unavailable(err, "log offsets: "+err.Error())
	}
	resync := resyncOutsideLog(h, logStart, logEnd)
	maxEntries, maxBytes := batchLimits(s.p.cfg, h)

	s.mu.Lock()
	if s.phase != phaseServing {
		// It failed since the Hello waited for it (fail ends the targets it finds
		// registered under s.mu: this one would be left behind).
		err := s.refusalLocked()
		if s.phase != phaseUnavailable {
			err = s.unavailable(errNotReady, "")
		}
		s.mu.Unlock()
		return nil, err
	}
	if r := s.resyncTopicLocked(h, logStart); r != nil {
		resync = r // before the others: the resume index is not an offset of this log at all
	}
	if resync == nil {
		resync = s.resyncPastHorizonLocked(h, logStart)
	}
	key := id.key()
	old := s.byClient[key]
	s.terms[key]++
	term := s.terms[key]
	ci := s.current.Load()
	// Who the target is and what it selects, set before a fetcher starts: a recovery
	// reads its principal (its Kafka slots are the principal's) and its selections.
	mk := func(state State) *target {
		t := newTarget(s, id.instance, h.GetViews(), term, state, maxEntries, maxBytes)
		t.key, t.service, t.principal = key, id.service, id.principal
		for _, v := range slices.Sorted(maps.Keys(sels)) {
			t.sels = append(t.sels, sels[v])
		}
		return t
	}
	var t *target
	switch {
	case h.ResumeIndex == nil || resync != nil:
		t = mk(StateRF)
		t.lastAck, t.sentUpTo = -1, -1
		t.mu.Lock()
		err := t.startSnapshotLocked(term, resync, logStart, ci)
		t.mu.Unlock()
		if err != nil {
			s.mu.Unlock()
			s.log.Warn("subscribe refused", "target", id.instance, "service", id.service, "err", err)
			return nil, err
		}
	case h.GetResumeIndex() >= ci:
		t = mk(StateN)
		t.lastAck, t.sentUpTo, t.recEnd = h.GetResumeIndex(), h.GetResumeIndex(), h.GetResumeIndex()
	default:
		r := h.GetResumeIndex()
		t = mk(StateRF)
		t.lastAck, t.sentUpTo = r, r
		t.mu.Lock()
		t.startRecoveryLocked(r+1, ci)
		t.mu.Unlock()
	}
	s.byClient[key] = t
	s.register(t)
	s.mu.Unlock()
	if old != nil {
		old.suspend(fmt.Errorf("%w: replaced by a new connection of the same instance", ErrSuspended))
		s.remove(old)
		s.p.metrics.replacements.WithLabelValues(s.cfg.Name).Inc()
		s.log.Info("target replaced by a new connection of the same instance", "target", id.instance, "service", id.service,
			"principal", id.principal.String(), "term", term)
	}
	if resync != nil {
		s.p.metrics.resyncs.WithLabelValues(s.cfg.Name, resync.GetReason().String()).Inc()
	}
	t.mu.Lock()
	state := t.q.state
	t.mu.Unlock()
	s.log.Info("target admitted", "target", id.instance, "service", id.service, "principal", id.principal.String(), "views", h.GetViews(), "resume", h.ResumeIndex, "term", term, "state", state.String(), "current", ci, "resync", resync.GetReason().String())
	return t, nil
}

// resyncOutsideLog returns the resync owed to a resume index outside the log: below its
// start (records after it were deleted) or at or past its end (the client holds records
// this log does not). nil when there is none.
func resyncOutsideLog(h *statecastv1.Hello, logStart, logEnd int64) *statecastv1.ResyncRequired {
	if h.ResumeIndex == nil {
		return nil
	}
	r := h.GetResumeIndex()
	switch {
	case r < logStart-1:
		return &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START, LogStart: logStart,
			Detail: fmt.Sprintf("resume index %d is below the log start %d", r, logStart)}
	case r >= logEnd:
		return &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_AHEAD_OF_LOG, LogStart: logStart,
			Detail: fmt.Sprintf("resume index %d is at or past the log end %d", r, logEnd)}
	}
	return nil
}

// resyncTopicLocked returns the resync owed to a resume index read from another topic: the
// client's topic ID (Hello.topic_id) is not the ID of the stream's topic, which was deleted
// and created again since. nil when there is none or either ID is unknown. s.mu held.
func (s *stream) resyncTopicLocked(h *statecastv1.Hello, logStart int64) *statecastv1.ResyncRequired {
	if h.ResumeIndex == nil || len(h.GetTopicId()) == 0 || len(s.topic) == 0 || bytes.Equal(h.GetTopicId(), s.topic) {
		return nil
	}
	return &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_TOPIC_CHANGED, LogStart: logStart,
		Detail: fmt.Sprintf("resume index %d is an offset of topic ID %s; topic %s is now %s", h.GetResumeIndex(),
			formatTopicID(h.GetTopicId()), s.cfg.Topic, formatTopicID(s.topic))}
}

// resyncPastHorizonLocked returns the resync owed to a resume index followed by records
// older than the tombstone horizon (the topic's delete.retention.ms): tombstones after it
// may be gone, so a replay could miss deletes. nil when there is none. s.mu held (the
// log timeline).
func (s *stream) resyncPastHorizonLocked(h *statecastv1.Hello, logStart int64) *statecastv1.ResyncRequired {
	if h.ResumeIndex == nil || h.GetResumeIndex() < 0 {
		return nil
	}
	r := h.GetResumeIndex()
	ts, ok := s.firstAfterTime(r)
	if !ok || time.Since(ts) < s.retention {
		return nil
	}
	return &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_PAST_TOMBSTONE_HORIZON, LogStart: logStart,
		Detail: fmt.Sprintf("records after resume index %d date from %s, beyond delete.retention.ms (%s): tombstones may be gone", r, ts.UTC().Format(time.RFC3339), s.retention)}
}

// batchLimits are the target's batch bounds: the player's, lowered by the client's (its
// hint, and its receive limit less the room of a frame).
func batchLimits(cfg Config, h *statecastv1.Hello) (maxEntries int, maxBytes int64) {
	maxEntries, maxBytes = cfg.MaxBatchEntries, cfg.MaxBatchBytes
	if n := int(h.GetMaxBatchEntries()); n > 0 && n < maxEntries {
		maxEntries = n
	}
	if n := int64(h.GetMaxBatchBytes()); n > 0 && n < maxBytes {
		maxBytes = n
	}
	if n := int64(h.GetMaxMessageBytes()) - RecordFrameRoom; n > 0 && n < maxBytes {
		maxBytes = n
	}
	return maxEntries, maxBytes
}

// resync starts the target over on the same stream when a recovery finds the log start
// moved past the records it needs (a DeleteRecords or retention while the target was
// behind): the target gets ResyncRequired and a snapshot, as admission would give it on
// reconnect. Under the stream lock (the main position) it takes a new term — stale pushes
// of the failed fetcher are dropped — clears both queues and restarts in RF with a snapshot
// bootstrap as of the main position ci; main entries after ci go to its normal queue.
// Batches already sent stay accounted until acknowledged. If the target has been replaced
// or suspended meanwhile, nothing happens.
func (t *target) resync(term uint64, from int64) {
	s := t.s
	logStart, _, err := s.offsets()
	if err != nil {
		t.fail(term, fmt.Errorf("%w: recovery from %d: log start moved past it, and %v", ErrStreamUnavailable, from, err))
		return
	}
	rs := &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START, LogStart: logStart,
		Detail: fmt.Sprintf("recovery from index %d: the log now starts at %d", from, logStart)}
	s.mu.Lock()
	t.mu.Lock()
	if t.q.term != term || t.q.state != StateRF || s.byClient[t.key] != t {
		t.mu.Unlock()
		s.mu.Unlock()
		return
	}
	if t.inSnapshot {
		// The client is inside a snapshot whose end is still queued: a resync frame there
		// breaks the protocol. End the stream instead; the reconnect gets the resync.
		t.mu.Unlock()
		s.mu.Unlock()
		t.fail(term, fmt.Errorf("%w: recovery from %d: log start moved past it during a snapshot; reconnect to resync", ErrStreamUnavailable, from))
		return
	}
	s.terms[t.key]++
	nterm := s.terms[t.key]
	t.q.restart(nterm)
	ci := s.current.Load()
	t.dropped = false
	t.recoveries++
	err = t.startSnapshotLocked(nterm, rs, logStart, ci)
	t.space.Broadcast()
	t.mu.Unlock()
	s.mu.Unlock()
	if err != nil {
		// The queue is restarted under the new term with no fetcher: end the stream; the
		// reconnect is admitted (or refused) like any subscription.
		t.fail(nterm, err)
		return
	}
	s.p.metrics.resyncs.WithLabelValues(s.cfg.Name, rs.GetReason().String()).Inc()
	s.log.Warn("recovery: log start moved past the target's position; resync on the same stream", "target", t.id,
		"from", from, "log_start", logStart, "term", nterm, "snapshot_at", ci)
}

// hasClient reports whether a target of key (principal and instance id) is registered: a
// new connection of it would replace it.
func (s *stream) hasClient(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byClient[key] != nil
}
