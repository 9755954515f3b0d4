package distributor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// ErrFenced: another producer with the stream's transactional id started (a new active
// distributor), or the broker aborted this one's transaction: this process may not write
// the stream any more. The stream goes back to standby, as after a lost lock.
var ErrFenced = errors.New("distributor: fenced by a newer producer of the stream")

// producer sends a stream's records through one transactional sarama AsyncProducer
// (idempotent, acks=all, one request in flight, lz4: kafkaconn.ProducerConfig, plus the
// stream's transactional id). open runs InitProducerId: the broker then refuses every
// later write of an earlier producer of the same transactional id and aborts its open
// transaction, so a distributor that lost its lock cannot land a record after the new
// active opened its producer — the fencing that the advisory lock alone cannot give (the
// lock only stops what has not been sent yet). Each publish is one Kafka transaction.
//
// Records are fed as a continuous pipeline (no stall between batches) while a goroutine
// counts the broker's acknowledgements. It is used by the stream's publisher loop only (one
// publish at a time). A producer is opened once per activation: after an error that leaves
// it unable to abort its transaction (fenced, or the broker unreachable for longer than
// sarama's retries), it calls lost, which ends the activation; opening a new one without
// the lock could fence the legitimate active.
type producer struct {
	brokers []string
	cfg     *sarama.Config
	topic   string
	split   time.Duration             // a transaction open this long is committed and the rest sent in the next
	lost    func(error)               // ends the activation
	hook    func(ctx context.Context) // Distributor.sendHook for this topic, or nil
	p       sarama.AsyncProducer
	// committing is closed when the last CommitTxn that commit started has returned.
	committing chan struct{}
}

// open creates the sarama producer, which fences every earlier producer of the stream's
// transactional id (and waits until their open transactions are aborted).
func (p *producer) open() error {
	ap, err := sarama.NewAsyncProducer(p.brokers, p.cfg)
	if err != nil {
		return fmt.Errorf("distributor: transactional producer %q for topic %q: %w", p.cfg.Producer.Transaction.ID, p.topic, err)
	}
	p.p = ap
	return nil
}

// publish sends the records of parts in order in one Kafka transaction, commits it, and
// returns when the broker acknowledged the commit, or the first error. On an error the
// transaction is aborted: none of its records is ever visible to a read_committed reader.
// A transaction still being fed after p.split is committed there and the rest goes into
// a new one, so that a very large epoch does not reach the transaction timeout (after
// which the broker aborts it and fences the producer): its first part is then visible
// before the rest, without an epoch-end or a position record until the last part.
func (p *producer) publish(ctx context.Context, parts []part) error {
	if p.p == nil {
		return fmt.Errorf("distributor: producer for topic %q: %w", p.topic, errProducerGone)
	}
	pi, i := 0, 0
	for {
		if err := p.p.BeginTxn(); err != nil {
			return p.failed(fmt.Errorf("distributor: begin transaction on topic %q: %w", p.topic, err))
		}
		start := time.Now()
		cut, n := false, 0
		err := p.sendIter(ctx, func() (*sarama.ProducerMessage, error) {
			for pi < len(parts) && parts[pi].next == nil && i >= parts[pi].n {
				pi, i = pi+1, 0
			}
			if pi == len(parts) {
				return nil, nil
			}
			if n++; n%256 == 0 && time.Since(start) > p.split {
				cut = true
				return nil, nil
			}
			m, err := nextRecord(parts, &pi, &i)
			if m == nil || err != nil {
				return nil, err
			}
			if p.hook != nil {
				p.hook(ctx)
			}
			return m, nil
		})
		if err == nil {
			if cerr := p.commit(ctx); cerr != nil {
				err = fmt.Errorf("distributor: commit transaction on topic %q: %w", p.topic, cerr)
			}
		}
		if err != nil && ctx.Err() != nil {
			// The activation ends and closes the producer, which aborts the transaction —
			// or, when Kafka does not answer, leaves it to the broker's timeout and the next
			// active's fencing. An abort here would wait for Kafka's retries.
			return err
		}
		if err != nil {
			return p.failed(err)
		}
		if !cut {
			return nil
		}
	}
}

// nextRecord returns the record of parts at part *pi, record *i, and moves past it; nil
// after the last one.
func nextRecord(parts []part, pi, i *int) (*sarama.ProducerMessage, error) {
	for *pi < len(parts) {
		pt := &parts[*pi]
		if pt.next != nil {
			if m, err := pt.next(); err != nil || m != nil {
				return m, err
			}
		} else if *i < pt.n {
			m := pt.gen(*i)
			*i++
			return m, nil
		}
		*pi, *i = *pi+1, 0
	}
	return nil, nil
}

// commit commits the open transaction. When ctx ends first it returns ctx's error without
// waiting (sarama retries a commit while the brokers do not answer): the commit may still
// complete, and the next activation, which reads the topic back after its producer fenced
// this one, finds its records there or not at all.
func (p *producer) commit(ctx context.Context) error {
	ap := p.p
	done, ended := make(chan error, 1), make(chan struct{})
	p.committing = ended
	go func() {
		defer close(ended)
		done <- ap.CommitTxn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errProducerGone = errors.New("the producer was closed after an error it could not recover from")

// failed aborts the current transaction after err. A producer that cannot abort (fenced,
// or in a fatal state) is closed and lost is called: the activation ends.
func (p *producer) failed(err error) error {
	if p.p == nil {
		return err
	}
	if p.p.TxnStatus()&sarama.ProducerTxnFlagReady != 0 {
		return err // no transaction open
	}
	aerr := p.p.AbortTxn()
	if aerr == nil && p.p.TxnStatus()&sarama.ProducerTxnFlagReady != 0 {
		return err
	}
	if aerr == nil {
		aerr = fmt.Errorf("transaction state %s after the abort", p.p.TxnStatus())
	}
	cause := fmt.Errorf("distributor: producer of topic %q cannot abort its transaction (%v) after: %w", p.topic, aerr, err)
	if fenced(err) || fenced(aerr) {
		cause = fmt.Errorf("%w: topic %q: %w", ErrFenced, p.topic, err)
	}
	_ = p.Close()
	p.lost(cause)
	return cause
}

// fenced reports whether err says that a newer producer of the transactional id exists or
// that the broker ended this producer's epoch.
func fenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch) ||
		errors.Is(err, sarama.ErrInvalidProducerIDMapping)
}

// sendIter publishes the messages next returns, in order, until it returns nil, and returns
// when the broker acknowledged all of them, or the first error. Feeding overlaps with
// sarama's batching, compression and the broker's writes.
// When next fails, feeding stops, the records already fed are flushed and next's error is
// returned. When ctx ends, feeding stops and ctx.Err() is returned at once, without
// waiting for the records already fed: the caller must not commit the transaction.
func (p *producer) sendIter(ctx context.Context, next func() (*sarama.ProducerMessage, error)) error {
	m, err := next()
	if err != nil || m == nil {
		return err
	}
	ap := p.p
	var failed atomic.Bool
	fed := make(chan int, 1)
	result := make(chan error, 1)
	go func() {
		var first error
		got, total := 0, -1
		fedc := fed
		for total < 0 || got < total {
			select {
			case _, ok := <-ap.Successes():
				if !ok {
					result <- errProducerGone // closed under a send that ctx ended
					return
				}
				got++
			case perr, ok := <-ap.Errors():
				if !ok {
					result <- errProducerGone
					return
				}
				got++
				if first == nil {
					first = perr.Err
					failed.Store(true)
				}
			case total = <-fedc:
				fedc = nil
			}
		}
		result <- first
	}()
	i := 0
	var genErr error
	for m != nil && !failed.Load() && ctx.Err() == nil {
		m.Topic = p.topic
		m.Partition = 0
		ap.Input() <- m
		i++
		if m, genErr = next(); genErr != nil {
			break
		}
	}
	fed <- i
	select {
	case err = <-result:
	case <-ctx.Done():
		// Not waited for: the transaction is never committed, so none of its records is
		// ever read, and with Kafka gone the acks could take sarama's retries.
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("distributor: produce to topic %q: %w", p.topic, err)
	}
	if genErr != nil {
		return genErr
	}
	if m != nil {
		return ctx.Err()
	}
	return nil
}

// inTransaction reports whether a transaction is open (Close aborts it).
func (p *producer) inTransaction() bool {
	return p.p != nil && p.p.TxnStatus()&sarama.ProducerTxnFlagInTransaction != 0
}

// Close flushes and closes the sarama producer.
func (p *producer) Close() error {
	if p.p == nil {
		return nil
	}
	ap := p.p
	p.p = nil
	// sarama's Close aborts an open transaction and flushes, retrying while the brokers do
	// not answer: with Kafka gone a shutdown would wait for its retries. Past a bound the
	// producer is left behind: its open transaction is aborted by the broker at its
	// timeout, or fenced by the next active's producer, and nothing of it is ever read.
	// A commit left running by commit (its ctx ended) must end first: sarama's Close
	// racing its CommitTxn reuses the producer's in-flight WaitGroup while it is waited on.
	committing := p.committing
	done := make(chan error, 1)
	go func() {
		if committing != nil {
			<-committing
		}
		done <- ap.Close()
	}()
	wait := max(p.cfg.Net.DialTimeout, 10*time.Second)
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		return fmt.Errorf("distributor: producer for topic %q did not close within %s (Kafka does not answer); left behind, its open transaction is never read", p.topic, wait)
	}
}
