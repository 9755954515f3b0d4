package player

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// service implements statecastv1.PlayerServer.
type service struct {
	statecastv1.UnimplementedPlayerServer
	p    *Player
	anon atomic.Int64
}

// Subscribe runs one target: it admits the Hello, then the calling goroutine is the
// target's sender (Algorithm 4's write side) and a second goroutine its receiver (the
// read side: acks). It returns when the target is suspended.
func (sv *service) Subscribe(stream statecastv1.Player_SubscribeServer) error {
	p := sv.p
	req, err := stream.Recv()
	if err != nil {
		return toStatus(err)
	}
	hello := req.GetHello()
	if hello == nil {
		return toStatus(fmt.Errorf("%w: the first message must be Hello", ErrBadHello))
	}
	if err := validateHello(hello); err != nil {
		return toStatus(err)
	}
	s := p.streams[hello.GetStream()]
	if s == nil {
		return toStatus(fmt.Errorf("%w: %q", ErrUnknownStream, hello.GetStream()))
	}
	select {
	case <-s.ready:
	case <-stream.Context().Done():
		return toStatus(stream.Context().Err())
	case <-p.ctx.Done():
		return toStatus(ErrClosed)
	}
	id := hello.GetClientId()
	if id == "" {
		id = "anonymous-" + strconv.FormatInt(sv.anon.Add(1), 10)
	}
	t, err := s.admit(id, hello)
	if err != nil {
		return toStatus(err)
	}
	defer s.remove(t)

	// The receiver and the sender run in their own goroutines; this goroutine is the health
	// checker. Returning cancels the stream's context, which unblocks a Send or Recv stuck
	// on a dead or stalled client.
	p.goTracked(func() { t.receive(stream) })
	t.signal() // a target admitted in N owes its client the caught-up progress message
	p.goTracked(func() { t.suspend(t.sendLoop(stream)) })
	tick := time.NewTicker(min(p.cfg.AckTimeout/4, time.Second))
	defer tick.Stop()
	for alive := true; alive; {
		select {
		case <-t.done:
			alive = false
		case <-tick.C:
			if err := t.healthCheck(); err != nil {
				t.suspend(err)
			}
		case <-stream.Context().Done():
			t.suspend(fmt.Errorf("%w: %v", ErrSuspended, stream.Context().Err()))
		case <-p.ctx.Done():
			t.suspend(ErrClosed)
		}
	}
	t.mu.Lock()
	err = t.err
	t.mu.Unlock()
	s.log.Info("target ended", "target", t.id, "err", err)
	return toStatus(err)
}

// healthCheck reports an ack time-out: batches sent more than AckTimeout ago are still
// unacknowledged and no ack came for AckTimeout.
func (t *target) healthCheck() error {
	timeout := t.s.p.cfg.AckTimeout
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.q.popped) > 0 && now.Sub(t.q.popped[0].sentAt) > timeout && now.Sub(t.lastAckAt) > timeout {
		return fmt.Errorf("%w: no ack for %s", ErrAckTimeout, timeout)
	}
	return nil
}

func validateHello(h *statecastv1.Hello) error {
	if h.GetStream() == "" {
		return fmt.Errorf("%w: empty stream", ErrBadHello)
	}
	for _, v := range h.GetViews() {
		if !record.ValidViewName(v) {
			return fmt.Errorf("%w: bad view name %q", ErrBadHello, v)
		}
	}
	if h.ResumeIndex != nil && h.GetResumeIndex() < -1 {
		return fmt.Errorf("%w: negative resume index %d", ErrBadHello, h.GetResumeIndex())
	}
	return nil
}

// admit decides how the target starts (Algorithm 5, target recovery): snapshot bootstrap,
// resync + snapshot, recovery from Kafka, or straight to N; and registers it with the
// dispatcher atomically with the main position (s.mu), so that every entry after that
// position goes to its normal queue and every entry up to it comes from the source.
func (s *stream) admit(id string, h *statecastv1.Hello) (*target, error) {
	p := s.p
	var resync *statecastv1.ResyncRequired
	var logStart, logEnd int64
	var err error
	if logStart, logEnd, err = s.offsets(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamUnavailable, err)
	}
	if h.ResumeIndex != nil {
		r := h.GetResumeIndex()
		switch {
		case r < logStart-1:
			resync = &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START,
				Detail: fmt.Sprintf("resume index %d is below the log start %d", r, logStart)}
		case r >= logEnd:
			resync = &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_AHEAD_OF_LOG,
				Detail: fmt.Sprintf("resume index %d is at or past the log end %d", r, logEnd)}
		}
		if resync != nil {
			resync.LogStart = logStart
		}
	}
	maxEntries := p.cfg.MaxBatchEntries
	if n := int(h.GetMaxBatchEntries()); n > 0 && n < maxEntries {
		maxEntries = n
	}
	maxBytes := p.cfg.MaxBatchBytes
	if n := int64(h.GetMaxBatchBytes()); n > 0 && n < maxBytes {
		maxBytes = n
	}

	s.mu.Lock()
	if h.ResumeIndex != nil && resync == nil && h.GetResumeIndex() >= 0 {
		if ts, ok := s.firstAfterTime(h.GetResumeIndex()); ok && time.Since(ts) >= s.retention {
			resync = &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_PAST_TOMBSTONE_HORIZON,
				Detail:   fmt.Sprintf("records after resume index %d date from %s, beyond delete.retention.ms (%s): tombstones may be gone", h.GetResumeIndex(), ts.UTC().Format(time.RFC3339), s.retention),
				LogStart: logStart}
		}
	}
	old := s.byClient[id]
	s.terms[id]++
	term := s.terms[id]
	ci := s.current.Load()
	var t *target
	switch {
	case h.ResumeIndex == nil || resync != nil:
		t = newTarget(s, id, h.GetViews(), term, StateRF, maxEntries, maxBytes)
		t.lastAck, t.sentUpTo = -1, -1
		t.mu.Lock()
		t.startSnapshotLocked(term, resync, logStart, ci)
		t.mu.Unlock()
	case h.GetResumeIndex() >= ci:
		t = newTarget(s, id, h.GetViews(), term, StateN, maxEntries, maxBytes)
		t.lastAck, t.sentUpTo, t.recEnd = h.GetResumeIndex(), h.GetResumeIndex(), h.GetResumeIndex()
	default:
		r := h.GetResumeIndex()
		t = newTarget(s, id, h.GetViews(), term, StateRF, maxEntries, maxBytes)
		t.lastAck, t.sentUpTo = r, r
		t.mu.Lock()
		t.startRecoveryLocked(r+1, ci)
		t.mu.Unlock()
	}
	s.byClient[id] = t
	s.register(t)
	s.mu.Unlock()
	if old != nil {
		old.suspend(fmt.Errorf("%w: replaced by a new connection of the same client", ErrSuspended))
		s.remove(old)
	}
	if resync != nil {
		p.metrics.resyncs.WithLabelValues(s.cfg.Name, resync.GetReason().String()).Inc()
	}
	t.mu.Lock()
	state := t.q.state
	t.mu.Unlock()
	s.log.Info("target admitted", "target", id, "views", h.GetViews(), "resume", h.ResumeIndex, "term", term, "state", state.String(), "current", ci, "resync", resync.GetReason().String())
	return t, nil
}

// receive reads acks until the stream fails (Algorithm 4, read completions).
func (t *target) receive(stream statecastv1.Player_SubscribeServer) {
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: client closed its send side", ErrSuspended)
			}
			t.suspend(err)
			t.signal()
			return
		}
		ack := req.GetAck()
		if ack == nil {
			t.suspend(fmt.Errorf("%w: only Acks may follow Hello", ErrBadHello))
			t.signal()
			return
		}
		t.mu.Lock()
		if ack.GetIndex() > t.sentUpTo {
			err := fmt.Errorf("%w: ack %d above the highest index sent %d", ErrBadAck, ack.GetIndex(), t.sentUpTo)
			t.mu.Unlock()
			t.suspend(err)
			t.signal()
			return
		}
		if ack.GetIndex() > t.lastAck {
			t.lastAck = ack.GetIndex()
		}
		t.lastAckAt = time.Now()
		// The sender waits for an ack only when its send window is full (sendLoop checks
		// it under t.mu, as here): wake it only when this ack opens the window, not for
		// every ack (that was one useless sender wake-up per frame per target).
		full := t.q.poppedBytes >= t.budget/4
		t.q.ack(ack.GetIndex())
		opened := full && t.q.poppedBytes < t.budget/4
		t.mu.Unlock()
		if opened {
			t.signal()
		}
	}
}

// sendLoop is the target's writer (sendNext): one write at a time, batches from the queue
// (Algorithm 2), a send window (unacked bytes) of a quarter of the budget, and progress
// messages when idle. It returns when the target is suspended or the stream fails.
func (t *target) sendLoop(stream statecastv1.Player_SubscribeServer) error {
	p := t.s.p
	// The sender waits on its wake channel alone (one channel: a select over five was half
	// of the sender's CPU with 1,000 targets). Everything that needs it signals it: the
	// dispatcher and the recovery sources (work), acks that open the send window, the
	// stream's progress loop (progress due), suspend, and the end of the stream's or the
	// player's context.
	stopStream := context.AfterFunc(stream.Context(), t.signal)
	defer stopStream()
	stopPlayer := context.AfterFunc(p.ctx, t.signal)
	defer stopPlayer()
	var batch []*item
	for {
		<-t.wake
		select {
		case <-t.done:
			return nil
		default:
		}
		if err := stream.Context().Err(); err != nil {
			return err
		}
		if p.ctx.Err() != nil {
			return ErrClosed
		}
		for {
			ci := t.s.current.Load()
			now := time.Now()
			t.mu.Lock()
			q := t.q
			if q.state == StateS {
				t.mu.Unlock()
				return nil
			}
			if q.poppedBytes >= t.budget/4 {
				t.mu.Unlock()
				break // send window full: wait for acks
			}
			wasCatchup := q.state != StateN
			batch = q.nextBatch(t.maxEntries, t.maxBytes, batch, now)
			var out any
			if len(batch) > 0 {
				for _, it := range batch {
					if it.index > t.sentUpTo {
						t.sentUpTo = it.index
					}
				}
				// Nothing is acked inside a snapshot (the client acks X after SnapshotEnd):
				// its batches are not tracked (their rows are shared with the materialized
				// copy), so neither the send window nor the ack time-out can stall it.
				f := batch[0].frame
				if f.GetSnapshotBegin() != nil {
					t.inSnapshot = true
				}
				if (t.inSnapshot && f.GetSnapshotEnd() == nil) || (f != nil && batch[0].index < 0) {
					q.untrackLast()
				}
				if f.GetSnapshotEnd() != nil {
					t.inSnapshot = false
				}
				if wasCatchup {
					t.space.Broadcast()
				}
			} else if t.owesProgressLocked(now, ci) {
				// A progress message when idle, and once as soon as the target has caught
				// up (N, nothing queued): a client that resumed at the head learns at once
				// that it is current instead of waiting for the next record.
				t.caughtUp = true
				t.sentUpTo = max(ci, t.sentUpTo)
				out = rawFrame(encodeProgress(t.sentUpTo))
			}
			if out == nil && len(batch) == 0 {
				t.mu.Unlock()
				break
			}
			t.lastSend = now
			head := max(ci, t.sentUpTo) // the batch may hold entries dispatched after ci was read
			t.mu.Unlock()
			if len(batch) > 0 {
				out = withHead(batchParts(batch), head) // items are immutable: framed outside the lock, not copied
			} else {
				out = withHead(append(make(rawParts, 0, 2), out.(rawFrame)), head)
			}
			if err := stream.SendMsg(out); err != nil {
				return err
			}
			sent := time.Now()
			for _, it := range batch {
				if it.dispatched != 0 {
					t.s.delay.Observe(float64(sent.UnixNano()-it.dispatched) / 1e9)
				}
			}
			clear(batch)
		}
	}
}
