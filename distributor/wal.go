package distributor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// A wal stream (capture: wal) publishes what its logical replication slot reports, in
// cycles (wal_cycle.go). This file holds the session: the connection of an active stream
// to its slot, from the views' analysis to the end of the replication connection.

// runWAL is an active wal stream: its state from the topic, then sessions until ctx ends.
// A session ends on any error of the database or the broker and a new one starts after a
// backoff; it begins with a full read of every view (a reconcile epoch, which publishes
// only what differs), so nothing depends on where the previous one stopped. A view or
// table the slot cannot serve (ErrConfig) ends the stream.
func (s *stream) runWAL(ctx context.Context, wg *sync.WaitGroup) error {
	for attempt := 0; ; attempt++ {
		s.resetState()
		var pos string
		n, err := restore(ctx, &s.d.cfg.Kafka, s.cfg.Topic, s.views, &pos, s.log)
		if err == nil && pos != "" {
			if s.position, err = capture.ParseLSN(pos); err != nil {
				err = fmt.Errorf("distributor: the topic's last position record: %w", err)
			}
		}
		if err == nil {
			s.log.Info("state restored from the topic", "stream", s.cfg.Topic, "records", n, "source_position", s.position)
			break
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		s.m.errors.WithLabelValues(s.cfg.Topic, "", "restore").Inc()
		d := backoff(attempt)
		s.log.Error("restore failed; retrying", "stream", s.cfg.Topic, "err", err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return context.Cause(ctx)
		}
	}
	stopCron, err := s.startCron(ctx)
	if err != nil {
		return err
	}
	defer stopCron()
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := s.walSession(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if errors.Is(err, ErrConfig) {
			return err
		}
		if time.Since(start) > time.Minute {
			attempt = 0
		}
		d := backoff(attempt)
		s.m.errors.WithLabelValues(s.cfg.Topic, "", "capture").Inc()
		s.log.Error("capture session ended; reconnecting", "stream", s.cfg.Topic, "err", err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return context.Cause(ctx)
		}
	}
}

// walSession is one connection of a wal stream to its slot.
type walSession struct {
	s       *stream
	recv    *capture.Receiver
	views   []*walView                  // in configuration order
	tables  map[uint32][]*walView       // base table → the views that read it
	pending []*capture.Txn              // received, not shown by a snapshot yet
	waiting map[*viewState][]chan error // reconcile requests, answered by the next cycle
	full    map[*viewState]string       // views to read in full by the next cycle, and why
}

// walSession runs one session until an error (or ctx's end).
func (s *stream) walSession(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &walSession{s: s, tables: map[uint32][]*walView{}, waiting: map[*viewState][]chan error{}, full: map[*viewState]string{}}
	defer w.answer(errors.New("distributor: capture session ended"))
	tables, err := w.analyze(ctx)
	if err != nil {
		return err
	}
	if err := capture.EnsurePublication(ctx, s.pool, s.cfg.Publication, tables, s.cfg.managePublication); err != nil {
		return w.configErr(err)
	}
	repl, err := s.replicationConn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = repl.Close(context.WithoutCancel(ctx)) }()
	start, first, err := w.openSlot(ctx, repl)
	if err != nil {
		return err
	}
	idents := map[uint32][]string{}
	for _, t := range tables {
		for _, c := range t.Identity {
			idents[t.OID] = append(idents[t.OID], c.Name)
		}
	}
	w.recv = capture.NewReceiver(repl, capture.ReceiverConfig{Slot: s.cfg.Slot, Publication: s.cfg.Publication, Start: start, Identity: idents})
	// recvDone is closed when the receiver returned (recvErr is then set): closed rather
	// than sent on, so that every wait on it sees it.
	recvDone := make(chan struct{})
	var recvErr error
	go func() {
		defer close(recvDone)
		recvErr = w.recv.Run(ctx)
	}()
	defer func() { cancel(); <-recvDone }()

	for _, v := range w.views {
		w.full[v.st] = "start-up"
	}
	if err := w.runCycle(ctx, first); err != nil {
		return err
	}
	s.once.Do(func() { close(s.ready) })
	err = w.loop(ctx, recvDone)
	select {
	case <-recvDone:
		if recvErr != nil && ctx.Err() == nil {
			return recvErr
		}
	default:
	}
	return err
}

// configErr marks an error of the database's setup (a table without a replica identity, a
// slot of another plugin, ...) as a configuration error: the stream cannot start.
func (w *walSession) configErr(err error) error {
	if errors.Is(err, capture.ErrAnalyze) {
		return fmt.Errorf("%w: stream %q: %w", ErrConfig, w.s.cfg.Topic, err)
	}
	return err
}

// replicationConn opens a replication connection (replication=database) with the
// stream's DSN.
func (s *stream) replicationConn(ctx context.Context) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(s.d.cfg.Postgres.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres.dsn: %v", ErrConfig, err)
	}
	cfg.RuntimeParams["replication"] = "database"
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("distributor: replication connection: %w", err)
	}
	return c, nil
}

// analyze asks PostgreSQL how each view depends on its tables and plans its re-reads.
func (w *walSession) analyze(ctx context.Context) ([]*capture.Table, error) {
	s := w.s
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("distributor: analyze views: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var tables []*capture.Table
	seen := map[uint32]bool{}
	for _, st := range s.order {
		v := st.cfg
		d, err := capture.Analyze(ctx, tx, capture.ViewSpec{Name: v.Name, SQL: v.SQL, Key: v.Key, Tables: v.Tables, Depends: v.Depends})
		if err != nil {
			return nil, w.configErr(err)
		}
		wv, err := newWalView(st, d)
		if err != nil {
			return nil, w.configErr(err)
		}
		w.views = append(w.views, wv)
		for _, t := range d.Tables {
			w.tables[t.OID] = append(w.tables[t.OID], wv)
			if !seen[t.OID] {
				seen[t.OID] = true
				tables = append(tables, t)
			}
		}
		for _, line := range d.Describe() {
			s.log.Info("view dependency", "stream", s.cfg.Topic, "view", v.Name, "table", line)
		}
		s.setDependencies(st, d.Describe())
	}
	return tables, nil
}

// openSlot validates or creates the stream's slot. It returns where streaming starts and
// the snapshot of the first cycle: the slot's exported snapshot for a new slot (exactly the
// database at the slot's start), nil for an existing one (the cycle takes a fresh one).
// A lost slot (invalidated, or dropped under the stream) is created again: the first
// cycle's full reads then publish whatever changed meanwhile.
func (w *walSession) openSlot(ctx context.Context, repl *pgconn.PgConn) (capture.LSN, *capture.Snapshot, error) {
	s := w.s
	var db string
	if err := s.pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return 0, nil, fmt.Errorf("distributor: current database: %w", err)
	}
	lost := false // counted and logged already
	for attempt := 0; ; attempt++ {
		info, err := capture.LookupSlot(ctx, s.pool, s.cfg.Slot)
		if err != nil {
			return 0, nil, err
		}
		if info != nil {
			err := info.Check(db)
			switch {
			case errors.Is(err, capture.ErrSlotLost):
				s.m.slotLost.WithLabelValues(s.cfg.Topic).Inc()
				s.log.Error("replication slot lost: creating a new one; the next epochs of every view publish what changed meanwhile",
					"stream", s.cfg.Topic, "slot", s.cfg.Slot, "err", err)
				if err := capture.DropSlot(ctx, s.pool, s.cfg.Slot); err != nil {
					return 0, nil, err
				}
				lost = true
				continue
			case err != nil:
				return 0, nil, fmt.Errorf("%w: stream %q: %w", ErrConfig, s.cfg.Topic, err)
			case info.ActivePID != 0:
				// Another connection streams from it: a previous holder of the stream's lock
				// whose replication connection outlived it (this process holds the lock now).
				if attempt >= 20 {
					return 0, nil, fmt.Errorf("distributor: slot %s stays in use by process %d", s.cfg.Slot, info.ActivePID)
				}
				s.log.Warn("replication slot in use by an old holder; ending that connection", "stream", s.cfg.Topic, "slot", s.cfg.Slot, "pid", info.ActivePID)
				_ = capture.Terminate(ctx, s.pool, info.ActivePID)
				if !sleepCtx(ctx, 100*time.Millisecond) {
					return 0, nil, ctx.Err()
				}
				continue
			}
			s.log.Info("replication slot found", "stream", s.cfg.Topic, "slot", s.cfg.Slot, "confirmed", info.ConfirmedFlush)
			return info.ConfirmedFlush, nil, nil
		}
		if s.position != 0 && !lost {
			// The stream was published from a slot before: the slot was dropped under it.
			s.m.slotLost.WithLabelValues(s.cfg.Topic).Inc()
			s.log.Error("replication slot missing (dropped?): creating a new one; the next epochs of every view publish what changed meanwhile",
				"stream", s.cfg.Topic, "slot", s.cfg.Slot, "last_position", s.position)
		}
		at, name, err := capture.CreateSlot(ctx, repl, s.cfg.Slot)
		if err != nil {
			return 0, nil, err
		}
		snap, err := capture.ImportSnapshot(ctx, s.pool, name, at)
		if err != nil {
			return 0, nil, err
		}
		s.log.Info("replication slot created", "stream", s.cfg.Topic, "slot", s.cfg.Slot, "consistent_point", at)
		return at, snap, nil
	}
}

// loop runs cycles while there is work, and position records while the stream is idle.
func (w *walSession) loop(ctx context.Context, recvDone <-chan struct{}) error {
	s := w.s
	timer := time.NewTimer(s.cfg.PositionInterval)
	defer timer.Stop()
	nextTick := time.Now().Add(s.cfg.PositionInterval)
	var nextSlotCheck time.Time
	for {
		if time.Now().After(nextSlotCheck) {
			w.checkSlot(ctx)
			nextSlotCheck = time.Now().Add(slotCheckInterval)
		}
		wake := nextTick
		if at, ok := w.nextRetry(); ok && at.Before(wake) {
			wake = at
		}
		timer.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-recvDone:
			return w.recv.Err()
		case req := <-s.reconcileCh:
			w.request(req)
		case <-w.recv.Notify():
		case <-timer.C:
		}
		if err := w.take(ctx); err != nil {
			return err
		}
		w.dueRetries()
		if w.hasWork() {
			if at, wait := w.debounced(); wait {
				if !sleepUntil(ctx, at, recvDone) {
					continue
				}
				if err := w.take(ctx); err != nil {
					return err
				}
			}
			if err := w.runCycle(ctx, nil); err != nil {
				return err
			}
			nextTick = time.Now().Add(s.cfg.PositionInterval)
			continue
		}
		if !time.Now().Before(nextTick) {
			if err := w.idle(ctx); err != nil {
				return err
			}
			nextTick = time.Now().Add(s.cfg.PositionInterval)
		}
	}
}

// slotCheckInterval is how often the slot's WAL retention is measured.
const slotCheckInterval = 5 * time.Second

// checkSlot measures how much WAL the slot retains (metrics, Status).
func (w *walSession) checkSlot(ctx context.Context) {
	s := w.s
	retained, behind, err := capture.Retained(ctx, s.pool, s.cfg.Slot)
	if err != nil {
		s.log.Warn("slot retention", "stream", s.cfg.Topic, "slot", s.cfg.Slot, "err", err)
		return
	}
	s.m.slotRetain.WithLabelValues(s.cfg.Topic).Set(float64(retained))
	s.m.slotBehind.WithLabelValues(s.cfg.Topic).Set(float64(behind))
	s.setStreamStatus("", retained)
}

// sleepUntil waits for at; false when ctx ended or the receiver stopped first.
func sleepUntil(ctx context.Context, at time.Time, recvDone <-chan struct{}) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-recvDone:
	}
	return false
}

// take moves the received transactions to pending.
func (w *walSession) take(ctx context.Context) error {
	txns, _, err := w.recv.Take(ctx, 0)
	if err != nil {
		return err
	}
	w.pending = append(w.pending, txns...)
	return nil
}

// request queues a reconcile (cron or Reconcile) for the next cycle.
func (w *walSession) request(req reconcileReq) {
	st := w.s.views[req.view]
	if st == nil {
		if req.done != nil {
			req.done <- fmt.Errorf("%w: %q", ErrUnknownView, req.view)
		}
		return
	}
	w.full[st] = "reconcile"
	if req.done != nil {
		w.waiting[st] = append(w.waiting[st], req.done)
	}
}

// answer ends the reconcile requests waiting on the views read by a cycle (or all of
// them when the session ends).
func (w *walSession) answer(err error, views ...*viewState) {
	for st, chans := range w.waiting {
		if len(views) > 0 && !hasView(views, st) {
			continue
		}
		e := err
		if e == nil && st.failed != nil {
			e = st.failed
		}
		for _, c := range chans {
			c <- e
		}
		delete(w.waiting, st)
	}
}

func hasView(views []*viewState, st *viewState) bool {
	for _, v := range views {
		if v == st {
			return true
		}
	}
	return false
}

// nextRetry is when the first stopped view is due for its retry.
func (w *walSession) nextRetry() (time.Time, bool) {
	var at time.Time
	for _, v := range w.views {
		if v.st.failed != nil && (at.IsZero() || v.st.retryAt.Before(at)) {
			at = v.st.retryAt
		}
	}
	return at, !at.IsZero()
}

// dueRetries queues a full read of each stopped view whose retry is due.
func (w *walSession) dueRetries() {
	now := time.Now()
	for _, v := range w.views {
		if v.st.failed != nil && !now.Before(v.st.retryAt) {
			w.full[v.st] = "retry"
		}
	}
}

func (w *walSession) hasWork() bool { return len(w.pending) > 0 || len(w.full) > 0 }

// debounced reports whether the pending changes would re-read a whole view that was read
// in full less than RereadDebounce ago, and until when to wait.
func (w *walSession) debounced() (time.Time, bool) {
	var until time.Time
	for _, t := range w.pending {
		for _, v := range w.fullReads(t) {
			if _, queued := w.full[v.st]; queued {
				continue
			}
			if at := v.lastFull.Add(w.s.cfg.RereadDebounce); at.After(until) {
				until = at
			}
		}
	}
	return until, time.Now().Before(until)
}

// idle publishes a position record when the server's decoded position moved past the last
// one published and nothing is pending: every commit before it is published.
func (w *walSession) idle(ctx context.Context) error {
	s := w.s
	w.recv.Ping()
	select {
	case <-w.recv.Notify():
	case <-time.After(5 * time.Millisecond):
	}
	txns, through, err := w.recv.Take(ctx, 0)
	if err != nil {
		return err
	}
	if len(txns) > 0 {
		w.pending = append(w.pending, txns...)
		return nil
	}
	if through <= s.position {
		return nil
	}
	t := &txnOut{}
	w.positionOf(t, through, time.Now())
	if err := s.publishTxn(ctx, t); err != nil {
		return err
	}
	w.published(through, through)
	return nil
}
