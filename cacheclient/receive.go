package cacheclient

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// receiver checks and applies the frames of one stream.
type receiver struct {
	c          *Client
	stream     grpc.BidiStreamingClient[statecastv1.SubscribeRequest, frame]
	resumed    bool
	progressed bool

	// Source transactions. open: a txn entry was applied and the position entry that ends
	// its transaction was not: what was applied since the last publication is staged in
	// the views' working versions, not published. staged is the highest index applied or
	// staged beyond the published position (-1: none).
	open   bool
	staged int64
	// Since the last publication: entries applied and the source time of the last of them
	// (OnBatchApplied, Stats); a snapshot waiting for the end of a source transaction open
	// at its index (published with it); readiness owed at the next publication.
	pendingEntries int
	pendingSource  time.Time
	pendingSnap    *snapshotDone
	readyPending   bool

	// Readiness of a resumed stream: the player's head_index in the stream's first frame
	// (its main position at subscribe); the client is caught up, hence ready, once its
	// applied position reaches it. readyAt -1: not known (yet), or not needed.
	firstFrame bool
	readyAt    int64
	headKnown  atomic.Bool // readyAt was set: the idle fallback stands down (session)

	inSnapshot   bool
	snapIndex    int64
	snapLast     int64 // last index seen inside the snapshot
	snapOpen     bool  // a txn row came after the snapshot's last position entry
	snapViews    []viewCore
	snapRows     int
	snapStart    time.Time
	snapLogAt    time.Time // the last progress report of the snapshot (its start at first)
	snapLogRows  int       // snapRows at snapLogAt
	subscribed   time.Time // Hello sent
	resyncReason string
	// topic is the topic ID of what this stream delivers: the one resumed from, else the
	// first one a frame carries; a ResyncRequired or a SnapshotBegin starts a new state,
	// of the topic ID it carries. Published with the index (Client.topic).
	topic string
}

// snapshotDone is a snapshot applied to the working versions, for its report at publication.
type snapshotDone struct {
	index    int64
	rows     int
	received time.Duration
}

func orderErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrOrder, fmt.Sprintf(format, a...))
}

func (r *receiver) handle(ctx context.Context, msg *frame) error {
	if msg.head > 0 {
		r.c.st.head.Store(msg.head)
	}
	if len(msg.topic) > 0 && string(msg.topic) != r.topic {
		switch {
		case msg.kind == frameResync || msg.kind == frameSnapshotBegin, r.topic == "":
			r.topic = string(msg.topic)
		default:
			return r.topicChanged(msg.topic)
		}
	}
	if !r.firstFrame {
		r.firstFrame = true
		if r.resumed && msg.head > 0 && !r.c.Ready() {
			r.readyAt = msg.head
			r.headKnown.Store(true)
		}
	}
	switch msg.kind {
	case frameBatch:
		if r.inSnapshot {
			return r.snapshotBatch(msg.entries)
		}
		return r.liveBatch(ctx, msg.entries)
	case frameProgress:
		if r.inSnapshot {
			return nil // carries no data; the snapshot's end sets the index
		}
		return r.progress(ctx, msg.index)
	case frameSnapshotBegin:
		return r.snapshotBegin(msg.index, msg.views)
	case frameSnapshotEnd:
		return r.snapshotEnd(ctx, msg.index)
	case frameResync:
		if r.inSnapshot {
			return orderErr("resync required inside a snapshot")
		}
		r.resyncReason = msg.reason.String()
		r.c.st.resyncs.Add(1)
		r.c.log.Warn("resync required: a snapshot replaces the views", "reason", r.resyncReason, "detail", msg.detail, "log_start", msg.logStart)
		if h := r.c.opts.hooks.OnResync; h != nil {
			h(r.resyncReason)
		}
		return nil
	}
	return orderErr("unknown frame (no known member set)")
}

func (r *receiver) ack(index int64) error {
	return r.stream.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: index}}})
}

// parseRow checks an entry's view and key and returns its view and row.
func (r *receiver) parseRow(e *entry) (viewCore, row, error) {
	v, ok := r.c.byName[e.view]
	if !ok {
		return nil, row{}, orderErr("entry %d of unsubscribed view %q", e.index, e.view)
	}
	k, p := e.key, v.keyPrefix()
	if !bytes.HasPrefix(k, p) {
		return nil, row{}, fmt.Errorf("%w: entry %d: key %q is not a key of view %q", ErrOrder, e.index, k, v.viewName())
	}
	// The message's bytes are its own (frameCodec copies them out of the gRPC buffer) and
	// nothing modifies them: the kept raw value (StateDir) aliases them. The key text is
	// copied (aliasing it would keep the view prefix's bytes alive with every key).
	return v, row{key: string(k[len(p):]), fullKey: k, value: e.value, tombstone: e.tombstone,
		index: e.index, stable: true}, nil
}

// received is the highest index applied, published or staged: every entry must be above it.
func (r *receiver) received() int64 { return max(r.c.applied.Load(), r.staged) }

// liveBatch applies a batch. Entries of a source transaction (txn) are staged until the
// position entry that ends it: the batch is published up to its last entry after which no
// transaction is open (at most once per batch: the working versions hold everything up to
// it), and what follows stays staged for a later batch. Either way the batch is acked: the
// player's send window must not wait for the end of a transaction larger than the window.
func (r *receiver) liveBatch(ctx context.Context, es []entry) error {
	if len(es) == 0 {
		return nil
	}
	// Check the whole batch before applying any of it: indexes strictly increasing and all
	// above what was received (like an ordered consumer: any anomaly → resubscribe).
	prev := r.received()
	for i := range es {
		e := &es[i]
		if e.index <= prev {
			return orderErr("entry index %d after %d", e.index, prev)
		}
		prev = e.index
		if e.kind == statecastv1.Kind_KIND_ROW {
			if _, _, err := r.parseRow(e); err != nil {
				return err
			}
		}
	}
	open, cut := r.open, -1
	for i := range es {
		switch {
		case es[i].kind == statecastv1.Kind_KIND_POSITION:
			open = false
		case es[i].txn:
			open = true
		}
		if !open {
			cut = i
		}
	}
	last := es[len(es)-1].index
	var mismatch error
	var pub published
	r.c.applyMu.Lock()
	for i := range es {
		e := &es[i]
		// Rows and control records carry the time of the commit or database snapshot they
		// come from: once applied, the cache reflects the database as of it.
		if ts, ok := e.sourceTime(); ok {
			r.pendingSource = ts
		}
		switch e.kind {
		case statecastv1.Kind_KIND_ROW:
			v, rw, _ := r.parseRow(e)
			v.applyRow(rw)
		case statecastv1.Kind_KIND_EPOCH_END:
			// On the working versions: what the stream holds up to the epoch's end, whether
			// or not a transaction is open around it.
			if err := r.epochCheck(e); err != nil && mismatch == nil {
				mismatch = err
			}
		case statecastv1.Kind_KIND_POSITION:
			r.position(e)
		}
		r.pendingEntries++
		if i == cut {
			pub = r.publish(e.index)
		}
	}
	r.open = open
	if cut < len(es)-1 {
		r.staged = last
	}
	r.c.applyMu.Unlock()
	r.c.st.batches.Add(1)
	r.published(pub)
	if err := r.ack(last); err != nil {
		return err
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	r.readyAfter(pub)
	if mismatch != nil {
		// Repair: drop the resume index; the next stream bootstraps from a snapshot that
		// replaces every view atomically.
		r.c.applied.Store(-1)
		r.c.dropMarks()
		r.c.st.resyncs.Add(1)
		if h := r.c.opts.hooks.OnResync; h != nil {
			h("epoch mismatch")
		}
		return mismatch
	}
	return nil
}

// published describes one publication, reported once applyMu is released (published).
type published struct {
	done     bool
	pos      int64
	entries  int
	source   time.Time
	snapshot *snapshotDone
	ready    bool
	at       time.Time
}

// publish publishes every view's working version at pos (Client.publish) and takes what
// the receiver owes the publication's report. c.applyMu held.
func (r *receiver) publish(pos int64) published {
	r.c.topic = r.topic
	r.c.publish(pos)
	p := published{done: true, pos: pos, entries: r.pendingEntries, source: r.pendingSource, snapshot: r.pendingSnap,
		ready: r.readyPending || r.pendingSnap != nil, at: r.c.opts.now()}
	r.staged, r.pendingEntries, r.pendingSource, r.pendingSnap, r.readyPending = -1, 0, time.Time{}, nil, false
	r.progressed = true
	return p
}

// topicChanged handles a frame of another topic than the one this stream resumed on,
// outside a resync: the player serves another topic under the stream's name and did not
// say so. The views' index means nothing there: the resume index is dropped, so that the
// next stream bootstraps from a snapshot that replaces every view.
func (r *receiver) topicChanged(topic []byte) error {
	r.c.applied.Store(-1)
	r.c.st.resyncs.Add(1)
	if h := r.c.opts.hooks.OnResync; h != nil {
		h("topic changed")
	}
	return orderErr("a frame of topic ID %x on a stream resumed on topic ID %x; resubscribing for a snapshot", topic, r.topic)
}

// published reports a publication: stats, hooks, logs, readiness. Without applyMu.
func (r *receiver) published(p published) {
	if !p.done {
		return
	}
	var lag time.Duration
	if !p.source.IsZero() {
		// A snapshot's rows are as old as their last change: they only move the source
		// time forward, and a lag is the delay of live entries.
		if n := unixNanoSat(p.source); p.snapshot == nil || n > r.c.st.lastSourceTime.Load() {
			r.c.st.lastSourceTime.Store(n)
		}
		if p.entries > 0 {
			lag = p.at.Sub(p.source)
			r.c.st.lastLagNanos.Store(int64(lag))
		}
	}
	if s := p.snapshot; s != nil {
		r.c.st.snapshots.Add(1)
		r.c.log.Info("snapshot applied", "index", s.index, "rows", s.rows, "published_at", p.pos, "resync", r.resyncReason,
			"begun_after", r.snapStart.Sub(r.subscribed), "received_in", s.received, "built_in", time.Since(r.snapStart)-s.received)
		if h := r.c.opts.hooks.OnSnapshot; h != nil {
			h(s.index, s.rows)
		}
	}
	if p.entries > 0 {
		r.c.st.entries.Add(int64(p.entries))
		if h := r.c.opts.hooks.OnBatchApplied; h != nil {
			h(p.entries, p.pos, lag)
		}
	}
}

// readyAfter marks the client ready when the publication p owes it — a snapshot's, or,
// after a resume, the one that reaches the head the player had at subscribe — once its
// changes were handed to the handlers (flush: WithInitialPass waits for those).
func (r *receiver) readyAfter(p published) {
	if p.ready || p.done && r.readyAt >= 0 && p.pos >= r.readyAt {
		r.c.markReady()
	}
}

// position applies a position entry: the end of a source transaction and the source
// position the working versions now reflect (published with them).
func (r *receiver) position(e *entry) {
	p, err := record.ParsePosition(e.value)
	if err != nil {
		r.c.log.Warn("unreadable position record; its source position is taken from its header", "index", e.index, "err", err)
		p = &record.Position{LSN: string(e.sourceLSN)}
	}
	src := sourceState{seen: true}
	if p.LSN != "" {
		lsn, err := ParseLSN(p.LSN)
		if err != nil {
			r.c.log.Warn("position record with an unreadable source position; the previous one is kept", "index", e.index, "lsn", p.LSN)
			src.hasLSN, src.lsn = r.c.wsrc.hasLSN, r.c.wsrc.lsn
		} else {
			src.hasLSN, src.lsn = true, lsn
		}
	}
	for _, v := range p.Stale {
		if _, ok := r.c.byName[v]; ok {
			src.stale = append(src.stale, v)
		}
	}
	for v, pos := range p.Behind {
		if _, ok := r.c.byName[v]; !ok {
			continue
		}
		lsn, err := ParseLSN(pos)
		if err != nil {
			// Unreadable: the view counts as stale, never as caught up.
			src.stale = append(src.stale, v)
			continue
		}
		if src.behind == nil {
			src.behind = map[string]LSN{}
		}
		src.behind[v] = lsn
	}
	r.c.wsrc = src
}

// flush hands the changes of the published versions to the handlers.
func (r *receiver) flush(ctx context.Context) error {
	for _, v := range r.c.views {
		if err := v.flushChanges(ctx); err != nil {
			return err
		}
	}
	r.c.markHandedOver()
	return nil
}

func (r *receiver) epochCheck(e *entry) error {
	v, ok := r.c.byName[e.view]
	if !ok || v.selection() != nil {
		// An epoch's count and hash are the whole view's: a selected view holds part of it.
		return nil
	}
	end, err := record.ParseEpochEnd(e.value)
	if err != nil {
		r.c.log.Warn("unreadable epoch-end record; not checked", "view", e.view, "index", e.index, "err", err)
		return nil
	}
	rows, hash := v.epochState()
	var res error
	if rows != end.Rows || hash != end.Hash {
		res = &EpochMismatchError{View: v.viewName(), Epoch: int64(end.Epoch), WantRows: end.Rows, HaveRows: rows, WantHash: end.Hash, HaveHash: hash, Position: e.index}
		r.c.st.epochBad.Add(1)
		r.c.log.Error("epoch check failed; resyncing from a fresh snapshot", "err", res)
	} else {
		r.c.st.epochOK.Add(1)
		r.c.log.Debug("epoch check passed", "view", v.viewName(), "epoch", end.Epoch, "rows", rows)
	}
	if h := r.c.opts.hooks.OnEpochCheck; h != nil {
		h(v.viewName(), int64(end.Epoch), res)
	}
	return res
}

func (r *receiver) progress(ctx context.Context, index int64) error {
	if index > r.received() {
		var pub published
		if r.open {
			// Nothing of the views moves inside an open transaction: the index is only
			// received (and acked, for the send window).
			r.staged = index
		} else {
			r.c.applyMu.Lock()
			pub = r.publish(index)
			r.c.applyMu.Unlock()
		}
		r.published(pub)
		if err := r.ack(index); err != nil {
			return err
		}
		if err := r.flush(ctx); err != nil {
			return err
		}
		r.readyAfter(pub)
	}
	if r.resumed {
		if r.open {
			r.readyPending = true
		} else {
			r.c.markReady()
		}
	}
	return nil
}

func (r *receiver) idleReady() {
	// Runs on the idle-timer goroutine; markReady only starts waiters and closes a channel.
	r.c.applyMu.Lock()
	defer r.c.applyMu.Unlock()
	r.c.markReady()
}

func (r *receiver) snapshotBegin(index int64, names []string) error {
	if r.inSnapshot {
		return orderErr("snapshot begin inside a snapshot")
	}
	r.inSnapshot, r.snapIndex, r.snapLast, r.snapRows, r.snapStart, r.snapOpen = true, index, -1, 0, time.Now(), false
	r.snapLogAt, r.snapLogRows = r.snapStart, 0
	r.c.st.snapRows.Store(0)
	r.c.st.snapStartNanos.Store(r.snapStart.UnixNano())
	r.snapViews = r.snapViews[:0]
	if len(names) == 0 {
		r.snapViews = append(r.snapViews, r.c.views...)
	}
	for _, n := range names {
		v, ok := r.c.byName[n]
		if !ok {
			return orderErr("snapshot of unsubscribed view %q", n)
		}
		r.snapViews = append(r.snapViews, v)
	}
	r.c.applyMu.Lock()
	// The snapshot replaces whatever was staged: a transaction open before it (a resync
	// in the middle of one) is in the snapshot's state, or superseded by it.
	r.c.rollback()
	r.open, r.staged, r.pendingEntries, r.pendingSource, r.pendingSnap = false, -1, 0, time.Time{}, nil
	for _, v := range r.snapViews {
		v.beginReplace()
	}
	r.c.applyMu.Unlock()
	r.c.st.snapshotTarget.Store(index)
	return nil
}

func (r *receiver) snapshotBatch(es []entry) error {
	for i := range es {
		e := &es[i]
		if e.index <= r.snapLast || e.index > r.snapIndex {
			return orderErr("snapshot entry %d after %d (snapshot at %d)", e.index, r.snapLast, r.snapIndex)
		}
		r.snapLast = e.index
		if e.kind == statecastv1.Kind_KIND_POSITION {
			// The latest position record up to the snapshot's index: the source position of
			// its state. A txn row after it belongs to a transaction open at the index.
			r.position(e)
			r.snapOpen = false
			continue
		}
		if e.kind != statecastv1.Kind_KIND_ROW {
			continue
		}
		v, rw, err := r.parseRow(e)
		if err != nil {
			return err
		}
		if !v.replacing() {
			return orderErr("snapshot entry of view %q not in the snapshot", v.viewName())
		}
		v.stageRow(rw)
		r.snapOpen = r.snapOpen || e.txn
		r.snapRows++
		if ts, ok := e.sourceTime(); ok && ts.After(r.pendingSource) {
			r.pendingSource = ts
		}
	}
	r.c.st.snapRows.Store(int64(r.snapRows))
	r.snapProgress()
	return nil
}

// snapProgress reports the snapshot being received, every Config.ProgressInterval: a log
// line and Hooks.OnSnapshotProgress.
func (r *receiver) snapProgress() {
	now := time.Now()
	if r.c.cfg.DisableProgress || now.Sub(r.snapLogAt) < r.c.cfg.ProgressInterval {
		return
	}
	elapsed := now.Sub(r.snapStart)
	r.c.log.Info("snapshot progress", "index", r.snapIndex, "rows", r.snapRows,
		"rows_per_s", int64(float64(r.snapRows-r.snapLogRows)/now.Sub(r.snapLogAt).Seconds()),
		"elapsed", elapsed.Round(time.Millisecond), "views", len(r.snapViews))
	r.snapLogAt, r.snapLogRows = now, r.snapRows
	if h := r.c.opts.hooks.OnSnapshotProgress; h != nil {
		h(r.snapIndex, int64(r.snapRows), elapsed)
	}
}

// snapshotEnd builds the snapshot's views and publishes them — unless the snapshot holds
// part of a source transaction open at its index: the views then stay staged, like the
// transaction's entries that follow live, until the position entry that ends it (and
// readiness waits for that publication).
func (r *receiver) snapshotEnd(ctx context.Context, index int64) error {
	if !r.inSnapshot || index != r.snapIndex {
		return orderErr("snapshot end %d (begun at %d, open %v)", index, r.snapIndex, r.inSnapshot)
	}
	done := &snapshotDone{index: index, rows: r.snapRows, received: time.Since(r.snapStart)}
	var pub published
	r.c.applyMu.Lock()
	for _, v := range r.snapViews {
		v.endReplace(index)
	}
	r.pendingSnap = done
	if r.snapOpen {
		r.open, r.staged = true, index
	} else {
		pub = r.publish(index)
	}
	r.c.applyMu.Unlock()
	r.inSnapshot = false
	r.c.st.snapStartNanos.Store(0)
	r.c.st.snapRows.Store(0)
	if r.snapOpen {
		r.c.log.Info("snapshot received inside a source transaction; applied at its end", "index", index, "rows", r.snapRows)
	}
	r.published(pub)
	if err := r.ack(index); err != nil {
		return err
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	r.readyAfter(pub)
	return nil
}

// abort drops what the stream left unfinished when it ended: a snapshot that was not
// complete, a source transaction that was not (its entries come again, whole, after the
// reconnect, which resumes from the published position).
func (r *receiver) abort() {
	if !r.inSnapshot && !r.open && r.staged < 0 {
		return // everything applied was published
	}
	r.c.applyMu.Lock()
	defer r.c.applyMu.Unlock()
	if r.inSnapshot {
		for _, v := range r.snapViews {
			v.abortReplace()
		}
		r.inSnapshot = false
		r.c.st.snapStartNanos.Store(0)
		r.c.st.snapRows.Store(0)
	}
	r.c.rollback()
	r.open, r.staged, r.pendingEntries, r.pendingSnap = false, -1, 0, nil
}

// unixNanoSat is t.UnixNano() saturated to int64's range: a source time outside years
// 1678-2262 (any producer may write one) must not wrap into a time of the other end.
func unixNanoSat(t time.Time) int64 {
	switch {
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	case t.Before(time.Unix(0, math.MinInt64+1)):
		return math.MinInt64 + 1
	}
	return t.UnixNano()
}
