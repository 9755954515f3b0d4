package distributor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// A wal stream (capture: wal) publishes what its logical replication slot reports, in
// cycles (wal_cycle.go). This file holds the session: the connection of an active stream
// to its slot, from the views' analysis to the end of the replication connection.

// runWAL is an active group of wal streams: their state from the topic, then sessions
// until ctx ends. A session ends on any error of the database or the broker and a new one
// starts after a backoff; it begins with a full read of every view (a reconcile epoch,
// which publishes only what differs), so nothing depends on where the previous one
// stopped. A view or table the slot cannot serve (ErrConfig) ends the group.
func (g *group) runWAL(ctx context.Context) error {
	for _, s := range g.streams {
		if err := s.restoreWAL(ctx); err != nil {
			return err
		}
		stopCron, err := s.startCron(ctx)
		if err != nil {
			return err
		}
		defer stopCron()
	}
	quick := 0 // sessions ended for a schema change in a row, restarted at once
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := g.walSession(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if errors.Is(err, ErrConfig) {
			return err
		}
		if time.Since(start) > time.Minute {
			attempt, quick = 0, 0
		}
		// A schema change is not an error: the next session analyzes the views again at
		// once. Should every session find one (a DDL repeated, or an analysis that cannot
		// agree with the server), the sessions back off as after an error.
		if reanalyze(err) && quick < 3 {
			quick++
			attempt--
			g.d.log.Info("a table's schema changed: analyzing the views again in a new session", "stream", g.topics(), "reason", err)
			continue
		}
		g.countErr("capture", err)
		if rerr := refusedByPostgres(err); rerr != nil {
			return rerr
		}
		d := retryWait(attempt)
		g.d.log.Error("capture session ended; reconnecting", "stream", g.topics(), "err", err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return context.Cause(ctx)
		}
	}
}

// restoreWAL rebuilds the stream's state and source position from its topic (retried
// until it succeeds or ctx ends), and notes the views the last position record names
// stale or behind: their rows in the topic are older than its position, so the next
// session reads them in full (warm.go).
func (s *stream) restoreWAL(ctx context.Context) error {
	return s.retry(ctx, "restore", "restore failed; retrying", func() error {
		s.resetState()
		s.position = 0
		s.mustRead = map[string]string{}
		var last record.Position
		prog := s.startProgress("", "restore")
		n, err := restore(ctx, &s.d.cfg.Kafka, s.cfg.Topic, s.views, &last, s.log, prog)
		prog.end()
		if err == nil && last.LSN != "" {
			if s.position, err = capture.ParseLSN(last.LSN); err != nil {
				err = fmt.Errorf("distributor: the topic's last position record: %w", err)
			}
		}
		for _, v := range last.Stale {
			s.mustRead[v] = "stopped at the last position"
		}
		for v := range last.Behind {
			s.mustRead[v] = "behind the stream at the last position"
		}
		if err == nil {
			s.log.Info("state restored from the topic", "stream", s.cfg.Topic, "records", n, "source_position", s.position)
		}
		return err
	})
}

// walSession is one stream's part of a capture session.
type walSession struct {
	s       *stream
	recv    *capture.Sub
	views   []*walView                  // in configuration order
	tables  map[uint32][]*walView       // base table → the views that read it
	locks   []*capture.Table            // every view's base tables: locked by each cycle (capture.LockTables)
	pending []*capture.Txn              // received, not shown by a snapshot yet
	waiting map[*viewState][]chan error // reconcile requests, answered by the next cycle
	full    map[*viewState]fullReason   // views to read in full by the next cycle, and why
	stale   staleWAL                    // when an idle stream has the server flush its WAL
	behind  behindState                 // views re-read off the cycles (wal_behind.go)
	bg      sync.WaitGroup              // their background reads
	// unanalyzed are the views stopped because their SQL failed the analysis (wal_ddl.go).
	unanalyzed []*viewState
}

// walSession runs one session of the group until an error (or ctx's end): the views'
// analysis, the publication, one replication connection to the slot and its receiver,
// and each stream's cycles on a subscription of its own.
func (g *group) walSession(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := g.streams[0]
	var tables []*capture.Table
	seen := map[uint32]bool{}
	ws := make([]*walSession, len(g.streams))
	for i, s := range g.streams {
		w := &walSession{s: s, tables: map[uint32][]*walView{}, waiting: map[*viewState][]chan error{}, full: map[*viewState]fullReason{},
			behind: newBehindState(len(s.order))}
		defer w.answer(errors.New("distributor: capture session ended"))
		defer w.bg.Wait() // after cancel (deferred later, run first): the reads end with ctx
		ts, err := w.analyze(ctx)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if !seen[t.OID] {
				seen[t.OID] = true
				tables = append(tables, t)
			}
		}
		ws[i] = w
	}
	if err := capture.EnsurePublication(ctx, first.pool, first.cfg.Publication, tables, first.cfg.managePublication); err != nil {
		return ws[0].configErr(err)
	}
	repl, err := first.replicationConn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = repl.Close(context.WithoutCancel(ctx)) }()
	start, snapName, err := g.openSlot(ctx, repl)
	if err != nil {
		return err
	}
	// A new slot's exported snapshot is imported by every stream now: it stays importable
	// only until the replication connection runs its next command.
	firsts := make([]*capture.Snapshot, len(ws))
	for i := range ws {
		if snapName == "" {
			break
		}
		if firsts[i], err = capture.ImportSnapshot(ctx, first.pool, snapName, start); err != nil {
			for _, f := range firsts[:i] {
				f.Close(ctx)
			}
			return err
		}
	}
	var views []*walView
	for _, w := range ws {
		views = append(views, w.views...)
	}
	captured := capturedColumns(views)
	for _, v := range views {
		v.bindColumns(captured)
	}
	// A captured value longer than every stream's record size limit cannot be in a record
	// of any: the receiver does not copy it.
	maxValue := 0
	for _, w := range ws {
		maxValue = max(maxValue, w.s.cfg.maxBytes)
	}
	recv := capture.NewReceiver(repl, capture.ReceiverConfig{Slot: first.cfg.Slot, Publication: first.cfg.Publication, Start: start, Tables: captured, MaxValueBytes: maxValue})
	for _, w := range ws {
		var oids []uint32
		for oid := range w.tables {
			oids = append(oids, oid)
		}
		w.recv = recv.Subscribe(oids)
	}
	// recvDone is closed when the receiver returned (recvErr is then set): closed rather
	// than sent on, so that every wait on it sees it.
	recvDone := make(chan struct{})
	var recvErr error
	go func() {
		defer close(recvDone)
		recvErr = recv.Run(ctx)
	}()
	defer func() { cancel(); <-recvDone }()

	errc := make(chan error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errc <- w.run(ctx, firsts[i], start, snapName != "", recvDone) })
	}
	err = <-errc
	cancel()
	wg.Wait()
	select {
	case <-recvDone:
		if recvErr != nil && !errors.Is(recvErr, context.Canceled) {
			return recvErr
		}
	default:
	}
	return err
}

// run is a stream's part of the session: the first cycle (the views that need it read
// in full, in first when the slot is new: wal_start.go), then the loop.
func (w *walSession) run(ctx context.Context, first *capture.Snapshot, slotStart capture.LSN, newSlot bool, recvDone <-chan struct{}) error {
	firstDone := false
	defer func() { w.carryBehind(firstDone) }()
	if err := w.startReads(ctx, slotStart, newSlot); err != nil {
		if first != nil {
			first.Close(ctx)
		}
		return err
	}
	if err := w.runCycle(ctx, first); err != nil {
		return err
	}
	firstDone = true
	w.s.markServing()
	return w.loop(ctx, recvDone)
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
// Tables that a view maps through columns outside their replica identity get REPLICA
// IDENTITY FULL first (unless the stream keeps replica identities as they are): without
// their old values, their changes would re-read the whole view.
func (w *walSession) analyze(ctx context.Context) ([]*capture.Table, error) {
	s := w.s
	altered := false
	for {
		views, tables, needFull, err := w.analyzeOnce(ctx)
		if err != nil {
			return nil, err
		}
		if len(needFull) == 0 || altered || s.cfg.ReplicaIdentity == ReplicaIdentityKeep {
			w.views = views
			w.locks = tables
			for _, v := range views {
				for _, line := range v.deps.Describe() {
					s.log.Info("view dependency", "stream", s.cfg.Topic, "view", v.st.cfg.Name, "table", line)
				}
				s.setDependencies(v.st, v.deps.Describe())
			}
			return tables, nil
		}
		for _, t := range needFull {
			if err := capture.SetReplicaIdentityFull(ctx, s.pool, t); err != nil {
				s.log.Warn("cannot set REPLICA IDENTITY FULL: the table's changes re-read the views that map it through other columns than its replica identity",
					"stream", s.cfg.Topic, "table", t.String(), "err", err)
				continue
			}
			s.log.Info("replica identity set to FULL: its changes carry the old values the views map them through", "stream", s.cfg.Topic, "table", t.String())
		}
		altered = true
		w.tables = map[uint32][]*walView{}
	}
}

// analyzeOnce analyzes every view of the stream in one transaction.
func (w *walSession) analyzeOnce(ctx context.Context) (views []*walView, tables, needFull []*capture.Table, err error) {
	s := w.s
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("distributor: analyze views: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The lookups are planned (walView.plan) with the settings the cycles read them with.
	if err := capture.SetLocal(ctx, tx, s.cfg.ReadSettings); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42704" || pe.Code == "22023" || pe.Code == "55P02" || pe.Code == "42501") {
			// unknown, invalid value, not settable at run time, not allowed to the role
			return nil, nil, nil, fmt.Errorf("%w: stream %q: read_settings: %w", ErrConfig, s.cfg.Topic, err)
		}
		return nil, nil, nil, err
	}
	seen, full := map[uint32]bool{}, map[uint32]bool{}
	w.unanalyzed = nil
	for _, st := range s.order {
		d, err := w.analyzeView(ctx, tx, st)
		if err != nil {
			return nil, nil, nil, err
		}
		if d == nil {
			continue // stopped: its SQL does not run any more (wal_ddl.go)
		}
		st.query = d.Definition
		wv, err := newWalView(st, d)
		if err != nil {
			return nil, nil, nil, w.configErr(err)
		}
		if err := wv.plan(ctx, tx); err != nil {
			return nil, nil, nil, w.configErr(err)
		}
		views = append(views, wv)
		for _, t := range d.Tables {
			w.tables[t.OID] = append(w.tables[t.OID], wv)
			if !seen[t.OID] {
				seen[t.OID] = true
				tables = append(tables, t)
			}
		}
		for _, t := range d.NeedFull {
			if !full[t.OID] {
				full[t.OID] = true
				needFull = append(needFull, t)
			}
		}
	}
	return views, tables, needFull, nil
}

// openSlot validates or creates the group's slot. It returns where streaming starts and,
// for a new slot, the name of its exported snapshot (exactly the database at the slot's
// start, which is the returned position); "" for an existing one (the first cycles take a
// fresh snapshot). A lost slot (invalidated, or dropped under the streams) is created
// again: the first cycles' full reads then publish whatever changed meanwhile.
func (g *group) openSlot(ctx context.Context, repl *pgconn.PgConn) (capture.LSN, string, error) {
	first := g.streams[0]
	slot := first.cfg.Slot
	log := g.d.log.With("stream", g.topics(), "slot", slot)
	var db string
	if err := first.pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return 0, "", fmt.Errorf("distributor: current database: %w", err)
	}
	published := false // a stream was published from a slot before
	for _, s := range g.streams {
		published = published || s.position != 0
	}
	countLost := func() {
		for _, s := range g.streams {
			s.m.slotLost.WithLabelValues(s.cfg.Topic).Inc()
		}
	}
	lost := false // counted and logged already
	for attempt := 0; ; attempt++ {
		info, err := capture.LookupSlot(ctx, first.pool, slot)
		if err != nil {
			return 0, "", err
		}
		if info != nil {
			err := info.Check(db)
			switch {
			case errors.Is(err, capture.ErrSlotLost):
				countLost()
				log.Error("replication slot lost: creating a new one; the next epochs of every view publish what changed meanwhile", "err", err)
				if err := capture.DropSlot(ctx, first.pool, slot); err != nil {
					return 0, "", err
				}
				lost = true
				continue
			case err != nil:
				return 0, "", fmt.Errorf("%w: stream %q: %w", ErrConfig, g.topics(), err)
			case info.ActivePID != 0:
				// Another connection streams from it: a previous holder of the lock whose
				// replication connection outlived it (this process holds the lock now).
				if attempt >= 20 {
					return 0, "", fmt.Errorf("distributor: slot %s stays in use by process %d", slot, info.ActivePID)
				}
				log.Warn("replication slot in use by an old holder; ending that connection", "pid", info.ActivePID)
				_ = capture.Terminate(ctx, first.pool, info.ActivePID)
				if !sleepCtx(ctx, 100*time.Millisecond) {
					return 0, "", ctx.Err()
				}
				continue
			}
			log.Info("replication slot found", "confirmed", info.ConfirmedFlush)
			return info.ConfirmedFlush, "", nil
		}
		if published && !lost {
			countLost()
			log.Error("replication slot missing (dropped?): creating a new one; the next epochs of every view publish what changed meanwhile")
		}
		at, name, err := capture.CreateSlot(ctx, repl, slot)
		if err != nil {
			return 0, "", err
		}
		log.Info("replication slot created", "consistent_point", at)
		return at, name, nil
	}
}

// loop runs cycles while there is work, and position records while the stream is idle.
func (w *walSession) loop(ctx context.Context, recvDone <-chan struct{}) error {
	s := w.s
	timer := time.NewTimer(s.cfg.PositionInterval)
	defer timer.Stop()
	nextTick := time.Now().Add(s.cfg.PositionInterval)
	for {
		if err := w.schemaChanged(ctx); err != nil {
			return err
		}
		// Taken before the state is looked at: a transaction received after this closes it,
		// so the wait below cannot miss it.
		notify := w.recv.Notify()
		if err := w.take(ctx); err != nil {
			return err
		}
		if err := w.publishRereads(ctx); err != nil {
			return err
		}
		w.dueRetries()
		if w.hasWork() {
			before := len(w.pending)
			if err := w.runCycle(ctx, nil); err != nil {
				return err
			}
			if len(w.pending) > 0 && len(w.pending) >= before {
				// Received commits the snapshot did not show yet (a commit is streamed an
				// instant before it is visible): try again shortly, not at once.
				if !sleepUntil(ctx, time.Now().Add(time.Millisecond), recvDone) {
					continue
				}
			}
			nextTick = time.Now().Add(s.cfg.PositionInterval)
			continue
		}
		if !time.Now().Before(nextTick) {
			if err := w.idle(ctx); err != nil {
				return err
			}
			nextTick = time.Now().Add(s.cfg.PositionInterval)
			continue
		}
		wake := nextTick
		if at, ok := w.nextRetry(); ok && at.Before(wake) {
			wake = at
		}
		if at, ok := w.nextReanalyze(); ok && at.Before(wake) {
			wake = at
		}
		if at, ok := w.nextReread(); ok && at.Before(wake) {
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
		case <-notify:
		case <-timer.C:
		case rr := <-w.behind.done:
			if err := w.publishReread(ctx, rr); err != nil {
				return err
			}
		}
	}
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
	if slices.Contains(w.unanalyzed, st) {
		if req.done != nil {
			req.done <- st.failed // left out of the session: nothing to read it with
		}
		return
	}
	w.full[st] = fullReconcile
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
			w.full[v.st] = fullRetry
		}
	}
}

// hasWork: received transactions to publish, full reads queued, or a background re-read
// due now.
func (w *walSession) hasWork() bool {
	if len(w.pending) > 0 || len(w.full) > 0 {
		return true
	}
	at, ok := w.nextReread()
	return ok && !time.Now().Before(at)
}

// idle publishes a position record when the server's decoded position moved past the last
// one published and nothing is pending: every commit before it is published.
func (w *walSession) idle(ctx context.Context) error {
	s := w.s
	notify := w.recv.Notify() // before the ping: its answer closes it
	w.recv.Ping()
	select {
	case <-notify:
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
	w.flushStale(ctx)
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
