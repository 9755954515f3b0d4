package cacheclient

import (
	"bytes"
	"context"
	"fmt"
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

	inSnapshot   bool
	snapIndex    int64
	snapLast     int64 // last index seen inside the snapshot
	snapViews    []viewCore
	snapRows     int
	snapStart    time.Time
	subscribed   time.Time // Hello sent
	resyncReason string
}

func orderErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrOrder, fmt.Sprintf(format, a...))
}

func (r *receiver) handle(ctx context.Context, msg *frame) error {
	if msg.head > 0 {
		r.c.st.head.Store(msg.head)
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

func (r *receiver) liveBatch(ctx context.Context, es []entry) error {
	if len(es) == 0 {
		return nil
	}
	// Check the whole batch before applying any of it: indexes strictly increasing and all
	// above the applied index (like an ordered consumer: any anomaly → resubscribe).
	prev := r.c.applied.Load()
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
	last := es[len(es)-1].index
	var mismatch error
	var lastSource time.Time
	r.c.applyMu.Lock()
	for i := range es {
		e := &es[i]
		// Rows and control records (polls, epochs) all carry the time of the database
		// snapshot they were read in: once applied, the cache reflects the database as of it.
		if ts, ok := e.sourceTime(); ok {
			lastSource = ts
		}
		switch e.kind {
		case statecastv1.Kind_KIND_ROW:
			v, rw, _ := r.parseRow(e)
			v.applyRow(rw)
		case statecastv1.Kind_KIND_EPOCH_END:
			if err := r.epochCheck(e); err != nil && mismatch == nil {
				mismatch = err
			}
		}
	}
	for _, v := range r.c.views {
		v.commit(last)
	}
	r.c.applied.Store(last)
	r.c.applyMu.Unlock()
	r.progressed = true
	now := r.c.opts.now()
	var lag time.Duration
	if !lastSource.IsZero() {
		r.c.st.lastSourceTime.Store(lastSource.UnixNano())
		lag = now.Sub(lastSource)
		r.c.st.lastLagNanos.Store(int64(lag))
	}
	r.c.st.entries.Add(int64(len(es)))
	r.c.st.batches.Add(1)
	if h := r.c.opts.hooks.OnBatchApplied; h != nil {
		h(len(es), last, lag)
	}
	if err := r.ack(last); err != nil {
		return err
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	if mismatch != nil {
		// Repair: drop the resume index; the next stream bootstraps from a snapshot that
		// replaces every view atomically.
		r.c.applied.Store(-1)
		r.c.st.resyncs.Add(1)
		if h := r.c.opts.hooks.OnResync; h != nil {
			h("epoch mismatch")
		}
		return mismatch
	}
	return nil
}

func (r *receiver) flush(ctx context.Context) error {
	for _, v := range r.c.views {
		if err := v.flushChanges(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (r *receiver) epochCheck(e *entry) error {
	v, ok := r.c.byName[e.view]
	if !ok {
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
	if index > r.c.applied.Load() {
		r.c.applyMu.Lock()
		for _, v := range r.c.views {
			v.commit(index)
		}
		r.c.applied.Store(index)
		r.c.applyMu.Unlock()
		r.progressed = true
		if err := r.ack(index); err != nil {
			return err
		}
	}
	if r.resumed {
		r.c.markReady()
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
	r.inSnapshot, r.snapIndex, r.snapLast, r.snapRows, r.snapStart = true, index, -1, 0, time.Now()
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
	r.c.applyMu.Lock() // the persister checks replacing() under it
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
		r.snapRows++
		if ts, ok := e.sourceTime(); ok {
			if n := ts.UnixNano(); n > r.c.st.lastSourceTime.Load() {
				r.c.st.lastSourceTime.Store(n)
			}
		}
	}
	return nil
}

func (r *receiver) snapshotEnd(ctx context.Context, index int64) error {
	if !r.inSnapshot || index != r.snapIndex {
		return orderErr("snapshot end %d (begun at %d, open %v)", index, r.snapIndex, r.inSnapshot)
	}
	received := time.Since(r.snapStart)
	r.c.applyMu.Lock()
	for _, v := range r.snapViews {
		v.endReplace(index)
	}
	for _, v := range r.c.views {
		if !v.replacing() {
			v.commit(index)
		}
	}
	r.c.applied.Store(index)
	r.c.applyMu.Unlock()
	r.inSnapshot = false
	r.progressed = true
	r.c.st.snapshots.Add(1)
	r.c.log.Info("snapshot applied", "index", index, "rows", r.snapRows, "resync", r.resyncReason,
		"begun_after", r.snapStart.Sub(r.subscribed), "received_in", received, "built_in", time.Since(r.snapStart)-received)
	if h := r.c.opts.hooks.OnSnapshot; h != nil {
		h(index, r.snapRows)
	}
	if err := r.ack(index); err != nil {
		return err
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	r.c.markReady()
	return nil
}

// abort drops a snapshot that was not complete when the stream ended.
func (r *receiver) abort() {
	if !r.inSnapshot {
		return
	}
	r.c.applyMu.Lock()
	for _, v := range r.snapViews {
		v.abortReplace()
	}
	r.c.applyMu.Unlock()
	r.inSnapshot = false
}
