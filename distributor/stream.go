package distributor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/backoff"
	"github.com/statecast/statecast/schemas/record"
)

// streamSettings are a stream's resolved settings.
type streamSettings struct {
	*StreamConfig
	maxBytes int // record size limit (broker/topic max.message.bytes, or the config's lower one)
}

type reconcileReq struct {
	view string     // looked up by the publisher loop (the only owner of s.views)
	done chan error // nil for cron requests
}

// stream runs one topic: standby until it holds the advisory lock, then the start-up epoch
// and the publisher loop (see doc.go).
type stream struct {
	d    *Distributor
	cfg  streamSettings
	log  *slog.Logger
	m    *metrics
	pool *pgxpool.Pool

	views map[string]*viewState
	order []*viewState

	reconcileCh chan reconcileReq
	wakeCh      chan string

	active atomic.Bool
	ready  chan struct{} // closed after the first start-up epoch
	once   sync.Once
	// serving: active and past this activation's start-up epochs (/readyz)
	serving atomic.Bool

	// owned by the publisher loop while active
	prod     *producer
	position capture.LSN // wal: the source position of the last position record published
	// mustRead names the views (→ why) whose rows may be older than position: stale or
	// behind at the last position record restored, or behind when a session ended. The
	// next session reads them in full (warm.go).
	mustRead map[string]string
	topicID  sarama.Uuid // the topic's ID, set before each activation (zero: unknown)

	statusMu    sync.Mutex
	status      map[string]*ViewStatus // by view (status.go)
	statusPos   string
	statusPosAt time.Time
	statusSlot  slotLag   // the slot watcher's last measurement (slotwatch.go)
	lastErr     lastError // the stream's last error, of any operation (countErr)
}

func newStream(d *Distributor, sc *StreamConfig) *stream {
	s := &stream{
		d: d, cfg: streamSettings{StreamConfig: sc},
		log: d.log, m: d.m, pool: d.pool,
		views:       map[string]*viewState{},
		reconcileCh: make(chan reconcileReq),
		wakeCh:      make(chan string, 64),
		ready:       make(chan struct{}),
	}
	s.resetState()
	return s
}

// resetState gives every view a new state. Status reads s.order under statusMu, from any
// goroutine and at any time: the new order replaces the old one under it.
func (s *stream) resetState() {
	views := map[string]*viewState{}
	order := make([]*viewState, 0, len(s.cfg.Views))
	for i := range s.cfg.Views {
		st := newViewState(&s.cfg.Views[i])
		views[st.cfg.Name] = st
		order = append(order, st)
	}
	s.statusMu.Lock()
	s.views, s.order = views, order
	s.statusMu.Unlock()
}

// startProducer opens the stream's transactional producer, which fences the producer of
// any earlier active (producer.go), retrying until it is open or ctx ends. lost is called
// when the producer becomes unusable (fenced): it must end the activation. The returned
// func closes the producer.
func (s *stream) startProducer(ctx context.Context, lost func(error)) (func(), error) {
	pcfg := s.d.cfg.Kafka.producerConfig()
	retries := s.m.produceRetries.WithLabelValues(s.cfg.Topic)
	pcfg.Producer.Retry.BackoffFunc = func(int, int) time.Duration { // called once per retry
		retries.Inc()
		return produceRetryBackoff.Delay(1)
	}
	pcfg.Producer.MaxMessageBytes = s.cfg.maxBytes
	pcfg.Producer.Compression = compressions[s.d.cfg.Kafka.Compression]
	// A short linger: a WAL cycle's few records wait at most 200µs for their request (the
	// linger adds to commit → visible at every ack a publish waits for), while a snapshot's
	// records still go in large batches (without any linger, requests carry fewer records
	// and a full snapshot loses rate).
	pcfg.Producer.Flush.Bytes = 1 << 20
	pcfg.Producer.Flush.Frequency = 200 * time.Microsecond
	pcfg.Producer.Transaction.ID = s.cfg.TransactionalID
	// A transaction begun right after the last one committed finds the coordinator still
	// writing that one's markers (CONCURRENT_TRANSACTIONS) and retries; sarama's backoff
	// (100 ms, 20 ms for the first partition) would add that to commit -> visible at
	// every busy cycle. From 1 ms, doubling to 100 ms, the retries still span seconds.
	pcfg.Producer.Transaction.Retry.BackoffFunc = func(retries, _ int) time.Duration {
		return txnRetryBackoff.Delay(retries)
	}
	pcfg.Producer.Transaction.Timeout = s.d.cfg.Kafka.TransactionTimeout
	s.prod = &producer{brokers: s.d.cfg.Kafka.Brokers, cfg: pcfg, topic: s.cfg.Topic,
		split: s.d.cfg.Kafka.TransactionTimeout / 2, lost: lost}
	if h := s.d.sendHook; h != nil {
		s.prod.hook = func(ctx context.Context) { h(ctx, s.cfg.Topic) }
	}
	if err := s.retry(ctx, "producer", "transactional producer failed; retrying", s.prod.open); err != nil {
		return nil, err
	}
	return func() {
		start, open := time.Now(), s.prod.inTransaction()
		if err := s.prod.Close(); err != nil {
			s.log.Warn("producer close", "stream", s.cfg.Topic, "err", err)
			return
		}
		// What a stop leaves in the stream: everything acknowledged before, nothing of a
		// transaction still open (aborted: no reader ever sees it).
		s.log.Info("producer flushed and closed", "stream", s.cfg.Topic, "open_transaction_aborted", open, "took", time.Since(start))
	}, nil
}

// runPoll is an active polling stream: the start-up epochs, then polls and reconciles
// until ctx ends.
func (s *stream) runPoll(ctx context.Context, wg *sync.WaitGroup) error {
	// Start-up: state from the topic, then one epoch per view from one snapshot.
	if err := s.retry(ctx, "snapshot", "start-up epoch failed; retrying", func() error {
		s.resetState()
		return s.startup(ctx)
	}); err != nil {
		return err
	}
	s.markServing()

	wg.Go(func() { s.listen(ctx) })
	stopCron, err := s.startCron(ctx)
	if err != nil {
		return err
	}
	defer stopCron()
	return s.loop(ctx)
}

// markServing records that this activation published its start-up epochs.
func (s *stream) markServing() {
	s.serving.Store(true)
	s.once.Do(func() { close(s.ready) })
}

// startCron sends a reconcile request for each view at its refresh_cron schedule until
// the returned stop is called.
func (s *stream) startCron(ctx context.Context) (stop func(), err error) {
	cr := cron.New()
	for _, st := range s.order {
		spec := st.cfg.schedule()
		if spec == "" {
			continue
		}
		if _, err := cr.AddFunc(spec, func() {
			select {
			case s.reconcileCh <- reconcileReq{view: st.cfg.Name}:
			case <-ctx.Done():
			}
		}); err != nil {
			return nil, fmt.Errorf("%w: view %q refresh_cron: %v", ErrConfig, st.cfg.Name, err)
		}
	}
	cr.Start()
	return func() { <-cr.Stop().Done() }, nil
}

// startup restores the views' state from the topic and publishes one epoch per view, all
// read from ONE snapshot, validated before anything is published, as one source
// transaction. A view whose read fails on its data or SQL (a bad row) is stopped and
// retried (failView); the others are published. Other errors (the database or the broker
// unreachable) fail the start-up, which is retried.
func (s *stream) startup(ctx context.Context) error {
	var pos record.Position
	prog := s.startProgress("", "restore")
	n, err := restore(ctx, &s.d.cfg.Kafka, s.cfg.Topic, s.views, &pos, s.log, prog)
	prog.end()
	if err != nil {
		return err
	}
	s.log.Info("state restored from the topic", "stream", s.cfg.Topic, "records", n)
	readStart := time.Now()
	tx, src, err := beginSnapshot(ctx, s.pool)
	if err != nil {
		return err
	}
	t := &txnOut{pos: record.Position{Time: src.time}}
	var failed []func()
	reads := 0
	for _, st := range s.order {
		prog := s.startProgress(st.cfg.Name, "snapshot")
		r, err := readView(ctx, tx, st, true, false, src, s.cfg.maxBytes, headerBytes(st.cfg.Name), prog)
		prog.end()
		if isErr(err, ErrView) {
			failed = append(failed, func() { s.failView(st, err, "snapshot") })
			continue
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		mode := record.ModeReconcile
		if r.view.epoch == 0 && len(r.view.hashes) == 0 {
			mode = record.ModeSnapshot
		}
		s.epochOut(t, r, mode)
		reads++
	}
	_ = tx.Rollback(context.WithoutCancel(ctx)) // read only: the reads hold everything to publish
	s.log.Info("start-up snapshot read and validated", "stream", s.cfg.Topic, "views", reads,
		"duration", time.Since(readStart))
	for _, f := range failed {
		f()
	}
	t.pos.Stale = s.staleViews()
	if err := s.publishTxn(ctx, t); err != nil {
		return err
	}
	for _, st := range s.order {
		st.nextPoll = time.Now().Add(st.cfg.PollInterval)
	}
	return nil
}

// loop is the publisher loop: polls when due or woken, reconciles on request.
func (s *stream) loop(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := time.Now().Add(time.Hour)
		for _, st := range s.order {
			if st.polled() && st.failed == nil && st.nextPoll.Before(next) {
				next = st.nextPoll
			}
			if !st.retryAt.IsZero() && st.retryAt.Before(next) {
				next = st.retryAt
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case req := <-s.reconcileCh:
			err := s.reconcile(ctx, s.views[req.view])
			if req.done != nil {
				req.done <- err
			}
		case name := <-s.wakeCh:
			if st := s.views[name]; st != nil && st.failures == 0 {
				st.nextPoll = time.Now()
			}
		case <-timer.C:
		}
		now := time.Now()
		for _, st := range s.order {
			if ctx.Err() != nil {
				break
			}
			if !st.retryAt.IsZero() && !now.Before(st.retryAt) {
				_ = s.reconcile(ctx, st)
			}
			if st.polled() && st.failed == nil && !now.Before(st.nextPoll) {
				s.poll(ctx, st)
			}
		}
	}
}

// poll runs one incremental poll of st. A bad row stops the view (failView); other errors
// are logged, counted and retried with backoff.
func (s *stream) poll(ctx context.Context, st *viewState) {
	start := time.Now()
	err := func() error {
		tx, src, err := beginSnapshot(ctx, s.pool)
		if err != nil {
			return err
		}
		r, err := readView(ctx, tx, st, false, false, src, s.cfg.maxBytes, headerBytes(st.cfg.Name), nil)
		_ = tx.Rollback(ctx)
		if err != nil {
			return err
		}
		t := &txnOut{pos: record.Position{Time: src.time, Stale: s.staleViews()}}
		s.pollOut(t, r)
		return s.publishTxn(ctx, t)
	}()
	switch {
	case err == nil:
		st.ok()
		s.m.pollTime.WithLabelValues(s.cfg.Topic, st.cfg.Name).Observe(time.Since(start).Seconds())
		st.nextPoll = time.Now().Add(st.cfg.PollInterval)
	case ctx.Err() != nil:
	case isErr(err, ErrView):
		s.failView(st, err, "poll")
	default:
		d := st.fail()
		st.nextPoll = time.Now().Add(d)
		s.countErr(st.cfg.Name, "poll", err)
		s.log.Error("poll failed; retrying", "stream", s.cfg.Topic, "view", st.cfg.Name, "err", err, "retry_in", d)
	}
}

// reconcile publishes a new epoch of st in its refresh mode. It is also how a stopped view
// is retried: its success resumes the view.
func (s *stream) reconcile(ctx context.Context, st *viewState) error {
	err := func() error {
		tx, src, err := beginSnapshot(ctx, s.pool)
		if err != nil {
			return err
		}
		rewrite := st.cfg.RefreshMode == ModeRewrite
		prog := s.startProgress(st.cfg.Name, "reconcile")
		r, err := readView(ctx, tx, st, true, rewrite, src, s.cfg.maxBytes, headerBytes(st.cfg.Name), prog)
		prog.end()
		_ = tx.Rollback(context.WithoutCancel(ctx)) // read only: r holds everything to publish
		if err != nil {
			return err
		}
		mode := record.ModeReconcile
		if rewrite {
			mode = record.ModeRewrite
		}
		t := &txnOut{pos: record.Position{Time: src.time}}
		s.epochOut(t, r, mode)
		t.pos.Stale = s.staleViews(st)
		return s.publishTxn(ctx, t)
	}()
	switch {
	case err == nil:
		st.retryAt = time.Time{}
		st.ok()
		s.resumeView(st)
	case ctx.Err() != nil:
	case isErr(err, ErrView):
		s.failView(st, err, "reconcile")
	default:
		d := st.fail()
		st.retryAt = time.Now().Add(d)
		s.countErr(st.cfg.Name, "reconcile", err)
		s.log.Error("reconcile failed; retrying", "stream", s.cfg.Topic, "view", st.cfg.Name, "err", err, "retry_in", d)
	}
	return err
}

// retry runs f until it succeeds or ctx ends (its cause is returned), counting each
// failure as op and logging it with msg, with backoff between tries.
func (s *stream) retry(ctx context.Context, op, msg string, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		s.countErr("", op, err)
		if rerr := refusedByPostgres(err); rerr != nil {
			return rerr
		}
		d := retryWait(attempt)
		s.log.Error(msg, "stream", s.cfg.Topic, "err", err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return context.Cause(ctx)
		}
	}
}

// retryBackoff is the wait between the tries of a failed PostgreSQL or Kafka operation
// (a session, a restore, a view's read, the listen connection): jittered, doubling from
// 100ms to 30s.
var retryBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: 30 * time.Second}

// produceRetryBackoff is the wait of the producer's own retries of a produce request
// (at most 100ms, jittered).
var produceRetryBackoff = backoff.Policy{Min: 50 * time.Millisecond, Max: 100 * time.Millisecond}

// txnRetryBackoff is the wait of the producer's retries of a transaction request (from
// 1ms, doubling to 100ms, jittered): see startProducer.
var txnRetryBackoff = backoff.Policy{Min: time.Millisecond, Max: 100 * time.Millisecond}

// retryWait is retryBackoff's wait before retry number attempt (from 0).
func retryWait(attempt int) time.Duration { return retryBackoff.Delay(attempt) }

func sleepCtx(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) }
