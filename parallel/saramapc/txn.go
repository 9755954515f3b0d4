package saramapc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/parallel"
)

// TxnHandler processes one record under CommitTransactional and sends its output records
// through out. A nil error completes the record: its outputs are committed, in the order
// sent, in the transaction that commits its offset. An error discards this attempt's outputs
// and retries the record (Config.Engine's MaxAttempts, Backoff, OnFailure). It runs on an
// engine worker, concurrently with other records under Engine.Ordering.
type TxnHandler func(ctx context.Context, r parallel.Record[Message], out *Producer) error

// Producer collects the output records of one attempt of one input record under
// CommitTransactional. It is handed to one TxnHandler call and must not be used after that
// call returned. Nothing is sent until the record is complete: the records go to Kafka in
// the transaction that commits the input's offset, so neither their partition nor their
// offset is known to the handler.
type Producer struct {
	msgs  []*sarama.ProducerMessage
	bytes int64
}

// Send queues msgs for the transaction. Topic, Key, Value, Headers, Partition (with a
// manual partitioner in Config.Producer), Timestamp and Metadata are kept; the messages
// are copied when they are sent, so the caller may not change them afterwards either.
func (p *Producer) Send(msgs ...*sarama.ProducerMessage) {
	for _, m := range msgs {
		p.msgs = append(p.msgs, m)
		p.bytes += msgSize(m)
	}
}

func msgSize(m *sarama.ProducerMessage) int64 {
	n := int64(0)
	if m.Key != nil {
		n += int64(m.Key.Length())
	}
	if m.Value != nil {
		n += int64(m.Value.Length())
	}
	return n
}

// cloneMsg returns a fresh message with the user-visible fields of m: sarama keeps
// per-send state in a ProducerMessage, and a transaction that failed is sent again.
func cloneMsg(m *sarama.ProducerMessage) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{
		Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: slices.Clone(m.Headers),
		Metadata: m.Metadata, Partition: m.Partition, Timestamp: m.Timestamp,
	}
}

// ErrFenced is wrapped by the error of a transaction the broker refused because this
// consumer no longer owns the partition (its group generation or member id is stale): a
// zombie after a rebalance. The claim ends; the new owner processes its records.
var ErrFenced = errors.New("saramapc: fenced: the partition has a newer owner")

func fencedError(err error) bool {
	return errors.Is(err, sarama.ErrIllegalGeneration) || errors.Is(err, sarama.ErrUnknownMemberId) ||
		errors.Is(err, sarama.ErrFencedInstancedId) || errors.Is(err, sarama.ErrRebalanceInProgress)
}

// txnProducer is the consumer's transactional producer, shared by its claims: one
// transaction at a time, so a claim's commit takes mu for the whole transaction.
type txnProducer struct {
	mu sync.Mutex
	p  sarama.SyncProducer
}

// pendingOutputs holds the outputs of completed records until a transaction commits them.
// A record's outputs are added before the engine marks the record complete (the handler
// has not returned yet), so every record that a Progress snapshot shows complete has its
// outputs here: a transaction takes exactly the outputs of the offsets it commits.
type pendingOutputs struct {
	mu    sync.Mutex
	space *sync.Cond
	max   int64
	bytes int64
	byOff map[int64][]*sarama.ProducerMessage
	kick  chan struct{} // capacity 1: asks the committer for an early commit
	done  bool          // the claim ended: waiters give up
	// pressure: more than half of max is pending. Read without the lock by the engine's
	// completion hook, which then kicks the committer: the outputs a commit may take are
	// those of completed records, and the last completions may come after the last add.
	pressure atomic.Bool
}

func newPendingOutputs(max int64) *pendingOutputs {
	p := &pendingOutputs{max: max, byOff: map[int64][]*sarama.ProducerMessage{}, kick: make(chan struct{}, 1)}
	p.space = sync.NewCond(&p.mu)
	return p
}

// add takes the outputs of the record at off. Past half of the bound it asks for a commit;
// at the bound it waits for a commit to make room (or ctx to end), before taking them: the
// record is not complete yet, so waiting after taking could hold the only outputs that a
// commit could free.
func (p *pendingOutputs) add(ctx context.Context, off int64, out *Producer) error {
	if len(out.msgs) == 0 {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.space.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.bytes > 0 && p.bytes+out.bytes > p.max {
		p.kickLocked()
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.done {
			return parallel.ErrClosed
		}
		p.space.Wait()
	}
	p.byOff[off] = append(p.byOff[off], out.msgs...)
	p.bytes += out.bytes
	p.checkPressure()
	return nil
}

// checkPressure updates pressure and kicks the committer under it; the lock is held.
func (p *pendingOutputs) checkPressure() {
	over := p.bytes*2 > p.max
	p.pressure.Store(over)
	if over {
		p.kickLocked()
	}
}

// completed runs after the engine marked a record complete.
func (p *pendingOutputs) completed() {
	if p.pressure.Load() {
		p.kickLocked() // a channel send: safe without the lock
	}
}

// addNow takes the outputs of the record at off without waiting for room: a dead letter,
// which has no way to fail.
func (p *pendingOutputs) addNow(off int64, out *Producer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byOff[off] = append(p.byOff[off], out.msgs...)
	p.bytes += out.bytes
	p.checkPressure()
}

func (p *pendingOutputs) kickLocked() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take returns copies of the outputs of the offsets that cp contains, in offset order, and
// the offsets; they stay pending until release.
func (p *pendingOutputs) take(cp *parallel.Checkpoint) ([]*sarama.ProducerMessage, []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var offs []int64
	for off := range p.byOff {
		if cp.Contains(off) {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	var msgs []*sarama.ProducerMessage
	for _, off := range offs {
		for _, m := range p.byOff[off] {
			msgs = append(msgs, cloneMsg(m))
		}
	}
	return msgs, offs
}

// release forgets the outputs of offs (committed).
func (p *pendingOutputs) release(offs []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, off := range offs {
		for _, m := range p.byOff[off] {
			p.bytes -= msgSize(m)
		}
		delete(p.byOff, off)
	}
	p.pressure.Store(p.bytes*2 > p.max)
	p.space.Broadcast()
}

// close wakes the waiters for good.
func (p *pendingOutputs) close() {
	p.mu.Lock()
	p.done = true
	p.space.Broadcast()
	p.mu.Unlock()
}

// commitTxn commits, in one transaction, the outputs of the offsets that p marks complete
// and p itself as the group's offset and metadata of topic/partition, on behalf of the
// group member gm (the broker refuses it when gm's generation is stale). It returns the
// number of output records committed. A fatal producer error is returned wrapped in
// errFatalProducer.
func (tp *txnProducer) commitTxn(pend *pendingOutputs, gm *sarama.ConsumerGroupMetadata, topic string, partition int32, p parallel.Progress) (int, error) {
	// The checkpoint as it will be committed: Encode may have left out the highest
	// completed offsets, whose outputs must then wait too.
	cp, err := parallel.DecodeCheckpoint(p.Watermark, p.Metadata)
	if err != nil {
		return 0, err
	}
	msgs, offs := pend.take(&cp)
	meta := p.Metadata
	offsets := map[string][]*sarama.PartitionOffsetMetadata{
		topic: {{Partition: partition, Offset: p.Watermark, LeaderEpoch: -1, Metadata: &meta}},
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if err := tp.p.BeginTxn(); err != nil {
		// The producer is not Ready after the previous transaction: recreating it is the
		// only way out.
		return 0, &fatalProducerError{fmt.Errorf("saramapc: begin transaction: %w", err)}
	}
	if len(msgs) > 0 {
		if err := tp.p.SendMessages(msgs); err != nil {
			return 0, tp.abort(fmt.Errorf("saramapc: send %d outputs: %w", len(msgs), err))
		}
	}
	if err := tp.p.AddOffsetsToTxnWithGroupMetadata(offsets, gm); err != nil {
		return 0, tp.abort(fmt.Errorf("saramapc: add offsets to transaction: %w", err))
	}
	if err := tp.p.CommitTxn(); err != nil {
		return 0, tp.abort(fmt.Errorf("saramapc: commit transaction %s/%d@%d: %w", topic, partition, p.Watermark, err))
	}
	pend.release(offs)
	return len(msgs), nil
}

// abort ends a failed transaction; its outputs stay pending for the next one.
func (tp *txnProducer) abort(err error) error {
	if fencedError(err) {
		err = fmt.Errorf("%w: %w", ErrFenced, err)
	}
	st := tp.p.TxnStatus()
	if st&sarama.ProducerTxnFlagFatalError != 0 {
		return &fatalProducerError{err}
	}
	if st&(sarama.ProducerTxnFlagInTransaction|sarama.ProducerTxnFlagAbortableError) != 0 {
		if aerr := tp.p.AbortTxn(); aerr != nil {
			return &fatalProducerError{fmt.Errorf("%w; abort: %w", err, aerr)}
		}
	}
	return err
}

// fatalProducerError: the transactional producer cannot continue (fenced by another
// producer with the same transactional id, or in an unrecoverable state): Run ends.
type fatalProducerError struct{ err error }

func (e *fatalProducerError) Error() string { return e.err.Error() }
func (e *fatalProducerError) Unwrap() error { return e.err }
