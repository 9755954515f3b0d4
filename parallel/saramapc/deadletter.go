package saramapc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/backoff"
	"github.com/statecast/statecast/parallel"
)

// Headers of a dead letter (Config.DeadLetterTopic, DeadLetterMessage), added after the
// original record's own headers. Values are text: numbers in decimal.
const (
	HeaderTopic     = "statecast.dlq.topic"     // the original record's topic
	HeaderPartition = "statecast.dlq.partition" // its partition
	HeaderOffset    = "statecast.dlq.offset"    // its offset
	HeaderAttempts  = "statecast.dlq.attempts"  // attempts made before it was given up
	HeaderError     = "statecast.dlq.error"     // the last attempt's error text
)

// DeadLetterMessage returns the dead letter of m for topic: m's key, value and headers, plus
// the headers HeaderTopic, HeaderPartition, HeaderOffset, HeaderAttempts and HeaderError.
// Config.DeadLetterTopic produces it; it is exported for a DeadLetter callback that sends
// with its own producer.
func DeadLetterMessage(topic string, m Message, attempts int, err error) *sarama.ProducerMessage {
	hs := make([]sarama.RecordHeader, 0, len(m.Headers)+5)
	for _, h := range m.Headers {
		if h != nil {
			hs = append(hs, *h)
		}
	}
	text := "<nil>"
	if err != nil {
		text = err.Error()
	}
	hs = append(hs,
		sarama.RecordHeader{Key: []byte(HeaderTopic), Value: []byte(m.Topic)},
		sarama.RecordHeader{Key: []byte(HeaderPartition), Value: strconv.AppendInt(nil, int64(m.Partition), 10)},
		sarama.RecordHeader{Key: []byte(HeaderOffset), Value: strconv.AppendInt(nil, m.Offset, 10)},
		sarama.RecordHeader{Key: []byte(HeaderAttempts), Value: strconv.AppendInt(nil, int64(attempts), 10)},
		sarama.RecordHeader{Key: []byte(HeaderError), Value: []byte(text)},
	)
	msg := &sarama.ProducerMessage{Topic: topic, Headers: hs}
	if m.Key != nil {
		msg.Key = sarama.ByteEncoder(m.Key)
	}
	if m.Value != nil {
		msg.Value = sarama.ByteEncoder(m.Value)
	}
	return msg
}

// deadLetterAttempts is how many times the sink tries a dead letter before it ends Run; it
// goes on trying afterwards, until the claim's shutdown gives up on the record.
const deadLetterAttempts = 5

// deadLetterSink returns the engine's DeadLetter under Config.DeadLetterTopic. Under
// CommitTransactional the dead letter joins the outputs of its offset (committed with it,
// exactly once). Otherwise it is produced before the sink returns, because the engine marks
// the record complete when it does: a dead letter that cannot be produced holds the record
// (its key waits, the watermark stays below it), ends Run after deadLetterAttempts, and
// returns only when the shutdown gave up on the record, so that it is never committed.
func (h *groupHandler) deadLetterSink(pend *pendingOutputs, then parallel.DeadLetter[Message]) parallel.DeadLetter[Message] {
	cfg := &h.c.cfg
	return func(ctx context.Context, r parallel.Record[Message], err error) {
		msg := DeadLetterMessage(cfg.DeadLetterTopic, r.Value, cfg.Engine.MaxAttempts, err)
		if pend != nil {
			out := &Producer{}
			out.Send(msg)
			pend.addNow(r.Offset, out)
		} else if !h.produceDeadLetter(ctx, msg) {
			return
		}
		if then != nil {
			then(ctx, r, err)
		}
	}
}

// deadLetterBackoff is the wait between tries to produce a dead letter: jittered, from
// 100ms doubling to 5s.
var deadLetterBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// produceDeadLetter sends msg, retrying with backoff until it is acknowledged (true) or ctx
// ends (false).
func (h *groupHandler) produceDeadLetter(ctx context.Context, msg *sarama.ProducerMessage) bool {
	wait := backoff.New(deadLetterBackoff)
	for attempt := 1; ; attempt++ {
		_, _, err := h.dlq.SendMessage(cloneMsg(msg))
		if err == nil {
			return true
		}
		h.c.log.Error("saramapc: dead letter not produced", "topic", msg.Topic, "attempt", attempt, "err", err)
		if attempt == deadLetterAttempts {
			h.c.fail(fmt.Errorf("saramapc: dead letter to %s: %w", msg.Topic, err))
		}
		if !backoff.Sleep(ctx, wait.Next()) {
			return false
		}
	}
}

// txnHandler runs Config.TxnHandler and hands its outputs to pend before the engine marks
// the record complete.
func (c *Consumer) txnHandler(pend *pendingOutputs) parallel.Handler[Message] {
	return func(ctx context.Context, r parallel.Record[Message]) error {
		out := &Producer{}
		if err := c.cfg.TxnHandler(ctx, r, out); err != nil {
			return err
		}
		return pend.add(ctx, r.Offset, out)
	}
}
