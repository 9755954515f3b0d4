package kafkaconn

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
)

// A statecast topic is written by a transactional producer, so every reader reads it
// read_committed (NewConfig sets it) and its offsets have gaps that compaction alone did not
// make: each transaction ends with a control record (a commit or abort marker) that takes
// an offset and is never delivered, and the records of an aborted transaction are never
// delivered either. The log therefore usually ENDS with a marker: the end offset is the last
// delivered record's offset + 2, and a reader that waits for the record at end-1 waits
// forever. The functions here find the end of what a read_committed reader can get and
// read up to it.

// CommittedOffsets returns the log start offset of partition and its last stable offset:
// the end (exclusive) of what a read_committed consumer can read now — the high-water mark
// when no transaction is open. The offset just below it may be a transaction marker, never
// delivered: read up to it with ReadCommitted, or ask NextCommitted.
func CommittedOffsets(client sarama.Client, topic string, partition int32) (start, end int64, err error) {
	if start, err = client.GetOffset(topic, partition, sarama.OffsetOldest); err != nil {
		return 0, 0, err
	}
	b, err := client.Leader(topic, partition)
	if err != nil {
		return 0, 0, err
	}
	req := sarama.NewOffsetRequest(client.Config().Version)
	if req.Version >= 2 {
		req.IsolationLevel = sarama.ReadCommitted
	}
	req.AddBlock(topic, partition, sarama.OffsetNewest, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		return 0, 0, err
	}
	blk := resp.GetBlock(topic, partition)
	switch {
	case blk == nil:
		return 0, 0, sarama.ErrIncompleteResponse
	case !errors.Is(blk.Err, sarama.ErrNoError):
		return 0, 0, blk.Err
	case len(blk.Offsets) > 0:
		end = blk.Offsets[0]
	default:
		end = blk.Offset
	}
	return start, max(start, end), nil
}

// NextCommitted returns the offset of the first record in [from, end) that a read_committed
// consumer delivers, or end when there is none: the offsets from `from` on are transaction
// markers, records of aborted transactions, or records compaction removed. end must not
// exceed the last stable offset (CommittedOffsets). It reads the log itself, with fetch
// requests to the partition's leader on client's connection.
func NextCommitted(client sarama.Client, topic string, partition int32, from, end int64) (int64, error) {
	maxBytes := int32(1 << 20)
	for from < end {
		leader, err := client.Leader(topic, partition)
		if err != nil {
			return 0, err
		}
		req := &sarama.FetchRequest{MinBytes: 1, MaxWaitTime: 100, MaxBytes: maxBytes, Isolation: sarama.ReadCommitted, Version: 4}
		if client.Config().Version.IsAtLeast(sarama.V2_1_0_0) {
			req.Version = 10 // the newest without flexible encoding; v4+ has the isolation level
			req.SessionID, req.SessionEpoch = 0, -1
		}
		req.AddBlock(topic, partition, from, maxBytes, -1)
		resp, err := leader.Fetch(req)
		if err != nil {
			return 0, err
		}
		blk := resp.GetBlock(topic, partition)
		if blk == nil {
			return 0, sarama.ErrIncompleteResponse
		}
		if !errors.Is(blk.Err, sarama.ErrNoError) {
			return 0, blk.Err
		}
		next, found, partial := scanCommitted(blk, from, end)
		switch {
		case found:
			return next, nil
		case partial && next == from:
			// a batch larger than the fetch: ask for more, as sarama's consumer does
			if maxBytes >= 1<<30 {
				return 0, sarama.ErrMessageTooLarge
			}
			maxBytes *= 2
		case next == from:
			// Nothing returned below end: the log is not there yet (end beyond the last
			// stable offset). Say that a record may still come rather than that none will.
			return from, nil
		}
		from = next
	}
	return end, nil
}

// scanCommitted walks the batches of blk from offset `from`: it returns the offset of the
// first record in [from, end) a read_committed consumer delivers (found), else the offset
// after the last complete batch it walked (partial: it stopped at an incomplete batch).
func scanCommitted(blk *sarama.FetchResponseBlock, from, end int64) (next int64, found, partial bool) {
	aborted := slices.Clone(blk.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b *sarama.AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	next = from
	for _, recs := range blk.RecordsSet {
		if recs.MsgSet != nil { // the pre-0.11 format has no transactions: every message is data
			for _, m := range recs.MsgSet.Messages {
				if m.Offset >= next && m.Offset < end {
					return m.Offset, true, false
				}
			}
			continue
		}
		rb := recs.RecordBatch
		if rb == nil {
			continue
		}
		if rb.PartialTrailingRecord {
			return next, false, true
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= rb.LastOffset() {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		last := rb.LastOffset()
		switch {
		case rb.Control:
			if len(rb.Records) > 0 && controlType(rb.Records[0].Key) == sarama.ControlRecordAbort {
				delete(abortedPIDs, rb.ProducerID)
			}
		case rb.IsTransactional && abortedPIDs[rb.ProducerID]:
		default:
			for _, r := range rb.Records {
				if off := rb.FirstOffset + r.OffsetDelta; off >= next && off < end {
					return off, true, false
				}
			}
		}
		if last+1 > next {
			next = last + 1
		}
		if next >= end {
			return end, false, false
		}
	}
	return next, false, false
}

// controlType reads a control record's type from its key (version int16, type int16).
func controlType(key []byte) sarama.ControlRecordType {
	if len(key) < 4 {
		return sarama.ControlRecordUnknown
	}
	switch binary.BigEndian.Uint16(key[2:4]) {
	case 0:
		return sarama.ControlRecordAbort
	case 1:
		return sarama.ControlRecordCommit
	}
	return sarama.ControlRecordUnknown
}

// ErrLogStartMoved: the records a read needed were deleted (retention or DeleteRecords)
// while it read them.
var ErrLogStartMoved = errors.New("kafkaconn: the log start moved past the read")

// ReadCommitted reads partition from offset `from` up to end (exclusive; CommittedOffsets'
// end) with a read_committed consumer on client and calls fn with every record, in order.
// It returns nil once every record below end that a read_committed consumer delivers has
// been passed to fn — without waiting for the transaction markers and aborted records
// that may end the range (it asks NextCommitted when the consumer goes quiet) — fn's error,
// ctx's error, ErrLogStartMoved (wrapped) when the consumer's offset falls out of range,
// or the consumer's error.
func ReadCommitted(ctx context.Context, client sarama.Client, topic string, partition int32, from, end int64, fn func(*sarama.ConsumerMessage) error) error {
	if from >= end {
		return nil
	}
	// Nothing but markers or aborted records in the range: no consumer needed.
	n, err := NextCommitted(client, topic, partition, from, end)
	if err != nil {
		return fmt.Errorf("kafkaconn: read %s from %d: %w", topic, from, err)
	}
	if n >= end {
		return nil
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, partition, n)
	if err != nil {
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			return fmt.Errorf("%w: %s from %d: %v", ErrLogStartMoved, topic, n, err)
		}
		return fmt.Errorf("kafkaconn: read %s from %d: %w", topic, n, err)
	}
	defer pc.AsyncClose()
	return readPartition(ctx, pc, topic, n, end, fn, func(next int64) (int64, error) {
		return NextCommitted(client, topic, partition, next, end)
	})
}

// readPartition is ReadCommitted's loop over pc, which starts at next; probe is
// NextCommitted from an offset. sarama closes pc's channels when it gives up on the
// partition (after an offset out of range, and a select may see the closed Messages
// channel before the error): that fails the read, with the error as its cause.
func readPartition(ctx context.Context, pc sarama.PartitionConsumer, topic string, next, end int64, fn func(*sarama.ConsumerMessage) error, probe func(int64) (int64, error)) error {
	quiet := time.NewTimer(quietProbe)
	defer quiet.Stop()
	failed := func(cerr error) error {
		if errors.Is(cerr, sarama.ErrOffsetOutOfRange) {
			return fmt.Errorf("%w: %s at %d: %v", ErrLogStartMoved, topic, next, cerr)
		}
		return fmt.Errorf("kafkaconn: read %s at %d: %w", topic, next, cerr)
	}
	stopped := func() error {
		for e := range pc.Errors() {
			if e != nil {
				return failed(e.Err)
			}
		}
		return fmt.Errorf("kafkaconn: read %s: the consumer stopped at %d", topic, next)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case cerr, ok := <-pc.Errors():
			if !ok {
				return fmt.Errorf("kafkaconn: read %s: the consumer stopped at %d", topic, next)
			}
			return failed(cerr.Err)
		case m, ok := <-pc.Messages():
			if !ok {
				return stopped()
			}
			if m.Offset >= end {
				return nil
			}
			if err := fn(m); err != nil {
				return err
			}
			next = m.Offset + 1
			if next >= end {
				return nil
			}
			quiet.Reset(quietProbe)
		case <-quiet.C:
			n, err := probe(next)
			if err != nil {
				return fmt.Errorf("kafkaconn: read %s at %d: %w", topic, next, err)
			}
			if n >= end {
				return nil
			}
			quiet.Reset(quietProbe)
		}
	}
}

// quietProbe is how long ReadCommitted's consumer may be quiet before it asks whether a
// record is still to come: short, since a marker ends almost every read, and cheap, since
// the probe is one fetch of the range's tail.
const quietProbe = 50 * time.Millisecond
