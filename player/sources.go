package player

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// The three recovery sources (the source interface, recovery.go), in the order a recovery
// fetcher tries them: snapshotSource (a bootstrap only), historySource, kafkaSource.

// snapshotSource is the snapshot bootstrap: it pushes the state at the main position x
// as a recovery of [x, x] (optionally preceded by a resync frame): SnapshotBegin x, the
// rows, SnapshotEnd x. rows are stream.snapshotItems at x (the rows and the latest
// position record): already in index order, without the rows below the log start (deleted
// from the log by DeleteRecords or retention: the snapshot shows the log as it is). Snapshot rows carry the index of their last change,
// older than what the target acked before a resync: they are pushed unfiltered. After the
// snapshot it holds nothing: later ranges are read from the next source.
type snapshotSource struct {
	t      *target
	term   uint64
	resync *statecastv1.ResyncRequired // nil: a plain bootstrap
	rows   *snapRows
	pinned int64 // bytes of rows not yet pushed, reserved with Player.pinSnapshot
	x      int64
	sent   bool
}

// unpinPushed releases the reservation of the first i rows, pushed (the queue accounts
// for their bytes, n, now), and drops them so that the snapshot no longer keeps them.
func (ss *snapshotSource) unpinPushed(i int, n int64) {
	ss.rows.drop(i)
	ss.pinned -= n
	ss.t.s.p.unpinSnapshot(n)
}

func (ss *snapshotSource) read(from, _ int64) (int64, error) {
	if ss.sent {
		return from, errNotHere
	}
	ss.sent = true
	push := func(it *item) bool { return ss.t.pushCatchup(it, ss.term, true) }
	if ss.resync != nil {
		if !push(frameItem(-1, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: ss.resync}, TopicId: ss.t.topic})) {
			return from, errStopped
		}
	}
	begin := frameItem(-1, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: ss.x, Views: ss.t.viewList}}, TopicId: ss.t.topic})
	if !push(begin) {
		return from, errStopped
	}
	// The reservation is released in chunks, not per row: one atomic add per chunk.
	const chunk = 256
	for ss.rows.len() > 0 {
		n := min(chunk, ss.rows.len())
		var size int64
		for i := range n {
			r := ss.rows.item(i)
			if !push(r) {
				return from, errStopped
			}
			size += int64(r.size())
		}
		ss.unpinPushed(n, size)
	}
	end := frameItem(ss.x, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: ss.x}}, TopicId: ss.t.topic})
	if !push(end) {
		return from, errStopped
	}
	ss.rows = nil
	return ss.x + 1, nil
}

func (ss *snapshotSource) close() {
	ss.t.s.p.unpinSnapshot(ss.pinned)
	ss.pinned, ss.rows = 0, nil
}

// historySource reads from the stream's history (history.go), a chunk at a time under
// stream.mu. It is errNotHere from the first index the history may have evicted.
type historySource struct {
	t     *target
	term  uint64
	chunk []*item // read from the history; chunk[next:] not pushed yet
	next  int
}

func (t *target) historySource(term uint64) *historySource {
	return &historySource{t: t, term: term}
}

func (h *historySource) read(from, to int64) (int64, error) {
	s := h.t.s
	for {
		if h.next == len(h.chunk) {
			select {
			case <-h.t.done:
				return from, errStopped
			case <-s.p.ctx.Done():
				return from, errStopped
			default:
			}
			clear(h.chunk)
			var ok bool
			s.mu.Lock()
			h.chunk, ok = s.hist.since(h.chunk[:0], from, 256)
			s.mu.Unlock()
			h.next = 0
			if !ok {
				return from, errNotHere
			}
			if len(h.chunk) == 0 {
				// Every record <= the main position is in the history, and to <= that
				// position: no record exists in [from, to].
				return to + 1, nil
			}
		}
		it := h.chunk[h.next]
		if it.index > to {
			return to + 1, nil // it is the next range's
		}
		h.next++
		if !h.t.pushCatchup(it, h.term, false) {
			return from, errStopped
		}
		from = it.index + 1
		if it.index == to {
			return from, nil
		}
	}
}

func (h *historySource) close() { clear(h.chunk) }

// kafkaSource reads the log from Kafka with a consumer of its own on the stream's
// recovery client, opened at the first read's from. An offset out of range (the log
// start moved past it: DeleteRecords or retention while the target was behind) is
// errLogStartMoved.
type kafkaSource struct {
	t        *target
	term     uint64
	consumer sarama.Consumer
	pc       sarama.PartitionConsumer
	pending  *sarama.ConsumerMessage // read past the end of a range: the next range's first
	slot     bool                    // holds one of its principal's Kafka slots
}

func (t *target) kafkaSource(term uint64) *kafkaSource {
	return &kafkaSource{t: t, term: term}
}

func (k *kafkaSource) read(from, to int64) (int64, error) {
	t, s := k.t, k.t.s
	if k.pc == nil {
		if err := k.open(from, to); err != nil {
			return from, err
		}
	}
	for {
		m := k.pending
		k.pending = nil
		if m == nil {
			select {
			case <-t.done:
				return from, errStopped
			case <-s.p.ctx.Done():
				return from, errStopped
			case e, ok := <-k.pc.Errors():
				if !ok {
					return from, k.closed(from)
				}
				if errors.Is(e.Err, sarama.ErrOffsetOutOfRange) {
					return from, fmt.Errorf("%w: %v", errLogStartMoved, e.Err)
				}
				return from, fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, e.Err)
			case mm, ok := <-k.pc.Messages():
				if !ok {
					return from, k.closed(from)
				}
				m = mm
			}
		}
		if m.Offset > to {
			k.pending = m
			return to + 1, nil
		}
		// A record the main fetcher skipped (poison) is skipped here too.
		if it := itemOf(m); poison(it, t.s.p.cfg.MaxRecordBytes) == "" && !t.pushCatchup(it, k.term, false) {
			return from, errStopped
		}
		from = m.Offset + 1
		if m.Offset == to {
			return from, nil
		}
	}
}

// closed is the error of a partition consumer that sarama closed under the read at from:
// errLogStartMoved when it gave up on an offset out of range (its error may be read after
// the closed Messages channel), else a failure of the recovery.
func (k *kafkaSource) closed(from int64) error {
	cause := consumerClosed(k.pc)
	if errors.Is(cause, sarama.ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: %v", errLogStartMoved, cause)
	}
	return fmt.Errorf("%w: recovery: the partition consumer closed at offset %d (%v)", ErrStreamUnavailable, from, cause)
}

func (k *kafkaSource) open(from, to int64) error {
	s := k.t.s
	// One of the principal's Kafka slots (Config.MaxKafkaRecoveriesPerPrincipal): many
	// targets of one principal recovering at once must not open a consumer each.
	// A source whose earlier open failed after it took its slot keeps that one.
	if !k.slot {
		ok, waited := s.p.limits.acquireKafka(k.t.principal.Name, k.t.done, s.p.ctx.Done())
		if !ok {
			return errStopped
		}
		if waited {
			s.log.Debug("recovery waited for a Kafka slot of its principal", "target", k.t.id, "principal", k.t.principal.String())
		}
		k.slot = true
	}
	consumer, err := s.newConsumer(s.recClient)
	if err != nil {
		return fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, err)
	}
	pc, err := consumer.ConsumePartition(s.cfg.Topic, 0, from)
	if err != nil {
		_ = consumer.Close()
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			return fmt.Errorf("%w: %v", errLogStartMoved, err)
		}
		return fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, err)
	}
	k.consumer, k.pc = consumer, pc
	s.log.Debug("recovery fetcher started", "target", k.t.id, "from", from, "to", to, "term", k.term)
	return nil
}

func (k *kafkaSource) close() {
	if k.pc != nil {
		k.pc.AsyncClose()
	}
	if k.consumer != nil {
		_ = k.consumer.Close()
	}
	if k.slot {
		k.t.s.p.limits.releaseKafka(k.t.principal.Name)
		k.slot = false
	}
}
