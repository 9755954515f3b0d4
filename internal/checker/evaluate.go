package checker

import (
	"fmt"
	"slices"
	"strings"
)

// evaluator replays one target's history.
type evaluator struct {
	id    string
	tr    *truth
	opts  Options
	out   []Violation
	count map[Guarantee]int

	// lineage: what the target holds across sessions.
	base    int64 // X of the snapshot its state derives from; -1 none
	claim   int64 // resume index of the last Hello: the target says it holds everything <= claim
	lineage map[int64]bool
	views   viewSet
	sels    map[string]Selection // the session's selections by view (nil: none)
	// held: the keys of selected views the target holds (its applied state), from its
	// snapshots and live entries; true when it holds the key.
	held map[string]bool

	// current session.
	session      int
	resume       int64
	hasResume    bool
	pos          int64 // last index delivered or progressed; valid when posValid
	posValid     bool
	needSnapshot bool
	resync       bool
	inSnap       bool
	snapX        int64
	snapViews    viewSet
	snapLast     int64
	snapKeys     map[string]Entry
}

func evaluate(id string, t *targetLog, tr *truth, opts Options) []Violation {
	e := &evaluator{id: id, tr: tr, opts: opts, count: map[Guarantee]int{}, base: -1, claim: -1, lineage: map[int64]bool{}}
	for _, ev := range t.events {
		e.step(ev)
	}
	if !t.gone {
		e.reliableAtEnd()
	}
	return e.out
}

func (e *evaluator) report(g Guarantee, format string, args ...any) {
	e.count[g]++
	n := e.count[g]
	switch {
	case n < e.opts.MaxPerTarget:
	case n == e.opts.MaxPerTarget:
		format = "(further %s violations of this target not listed) " + format
		args = append([]any{g}, args...)
	default:
		return
	}
	e.out = append(e.out, Violation{Guarantee: g, Target: e.id, Session: e.session, Detail: fmt.Sprintf(format, args...)})
}

func (e *evaluator) step(ev event) {
	if ev.kind != evHello && e.session == 0 {
		e.session = 0
		e.report(Ordered, "frame received before any Hello")
		e.hello(event{kind: evHello})
	}
	switch ev.kind {
	case evHello:
		e.hello(ev)
	case evBatch:
		if e.inSnap {
			e.snapBatch(ev.entries)
		} else {
			e.liveBatch(ev.entries)
		}
	case evProgress:
		e.progress(ev.index)
	case evSnapBegin:
		e.snapBegin(ev)
	case evSnapEnd:
		e.snapEnd(ev.index)
	case evResync:
		e.resync = true
	}
}

func (e *evaluator) hello(ev event) {
	e.session++
	e.inSnap, e.resync = false, false // a snapshot cut by a disconnect is discarded by the client
	e.views = newViewSet(ev.views)
	e.sels = ev.sels
	e.resume, e.hasResume = ev.resume, ev.hasResume
	if ev.hasResume {
		for i := range e.lineage {
			if i > ev.resume {
				delete(e.lineage, i) // received but never applied: may come again
			}
		}
		if e.base > ev.resume {
			e.base = ev.resume
		}
		e.claim = ev.resume
		e.pos, e.posValid, e.needSnapshot = ev.resume, true, false
		return
	}
	e.lineage = map[int64]bool{}
	e.held = map[string]bool{}
	e.base, e.claim = -1, -1
	e.pos, e.posValid, e.needSnapshot = -1, false, true
}

// selectionOf returns the session's selection of view (nil: the view whole).
func (e *evaluator) selectionOf(view string) Selection {
	if e.sels == nil {
		return nil
	}
	return e.sels[view]
}

// passes reports whether a row record passes the session's selection of its view (a
// tombstone never does); true for a record of a view received whole.
func (e *evaluator) passes(r Record) bool {
	sel := e.selectionOf(r.View)
	if sel == nil || kindOf(r.Kind) != KindRow {
		return true
	}
	return !r.Tombstone && sel(r)
}

// selected reports whether r is a row record of a selected view.
func (e *evaluator) selected(r Record) bool {
	return kindOf(r.Kind) == KindRow && e.selectionOf(r.View) != nil
}

// optional reports whether r need not be delivered: an epoch-end record of a selected view
// (it counts the whole view; the player does not send it to a target that holds part).
func (e *evaluator) optional(r Record) bool {
	return kindOf(r.Kind) == KindEpochEnd && e.selectionOf(r.View) != nil
}

func (e *evaluator) liveBatch(entries []Entry) {
	for _, en := range entries {
		if e.needSnapshot {
			e.report(Reliable, "new target (no resume index) got live entry %d before any snapshot", en.Index)
			e.needSnapshot = false
			e.pos, e.posValid = en.Index-1, true
		}
		if e.posValid && en.Index <= e.pos {
			e.report(Ordered, "entry %d after %d", en.Index, e.pos)
		}
		if e.hasResume && en.Index <= e.resume {
			e.report(Resumable, "entry %d at or below the resume index %d", en.Index, e.resume)
		}
		if e.lineage[en.Index] {
			e.report(Unique, "entry %d delivered again", en.Index)
		} else if e.base >= 0 && en.Index <= e.base {
			e.report(Unique, "entry %d already covered by the snapshot at %d", en.Index, e.base)
		} else if en.Index <= e.claim {
			e.report(Unique, "entry %d already held by the target (it resumed from %d)", en.Index, e.claim)
		}
		if !e.views.wantsEntry(en) {
			e.report(Resumable, "entry %d of view %q the target did not subscribe to", en.Index, en.View)
		}
		if e.posValid && en.Index > e.pos {
			e.gap(e.pos, en.Index, false)
		}
		e.matchTruth(en)
		if kindOf(en.Kind) == KindRow && e.selectionOf(en.View) != nil {
			if en.Tombstone {
				delete(e.held, en.Key)
			} else {
				e.held[en.Key] = true
			}
		}
		e.lineage[en.Index] = true
		if !e.posValid || en.Index > e.pos {
			e.pos, e.posValid = en.Index, true
		}
	}
}

// gap reports records of the session's views in (from, to) (or (from, to]) never delivered.
func (e *evaluator) gap(from, to int64, incl bool) {
	if !e.tr.known {
		return
	}
	var miss []Record
	for _, r := range e.tr.between(e.views, from, to, incl) {
		switch {
		case e.optional(r):
		case !e.selected(r):
			miss = append(miss, r)
		case e.passes(r):
			miss = append(miss, r)
			e.held[r.Key] = true
		case e.held[r.Key]:
			// The row moved out (or was deleted) while the target held it: its tombstone
			// was owed at this index.
			miss = append(miss, r)
			delete(e.held, r.Key)
		}
	}
	if len(miss) == 0 {
		return
	}
	what := "entry"
	if incl {
		what = "progress"
	}
	e.report(Resumable, "%s %d skips %d record(s) of its views after %d: %s", what, to, len(miss), from, indexes(miss))
}

func (e *evaluator) matchTruth(en Entry) {
	if !e.tr.known {
		return
	}
	r, ok := e.tr.byIndex[en.Index]
	if !ok {
		if en.Index > e.tr.end() || !e.opts.AllowCompacted {
			e.report(Resumable, "entry %d is not a record of the topic (end %d)", en.Index, e.tr.end())
		}
		return
	}
	if e.selected(r) && r.Key == en.Key && r.View == en.View && kindOf(en.Kind) == KindRow {
		switch pass := e.passes(r); {
		case en.Tombstone && pass:
			e.report(Resumable, "entry %d is a tombstone of key %q, whose row there passes the target's selection of view %q", en.Index, en.Key, en.View)
		case !en.Tombstone && !pass:
			e.report(Resumable, "entry %d of key %q does not pass the target's selection of view %q (or is a tombstone), yet came as a row", en.Index, en.Key, en.View)
		}
		return
	}
	if r.Key != en.Key || r.View != en.View || kindOf(r.Kind) != kindOf(en.Kind) || r.Tombstone != en.Tombstone {
		e.report(Resumable, "entry %d is {key %q view %q kind %s tombstone %v}, the topic has {key %q view %q kind %s tombstone %v}",
			en.Index, en.Key, en.View, kindOf(en.Kind), en.Tombstone, r.Key, r.View, kindOf(r.Kind), r.Tombstone)
	}
}

func (e *evaluator) progress(p int64) {
	if e.inSnap {
		e.report(Ordered, "progress %d inside the snapshot at %d", p, e.snapX)
		return
	}
	if e.needSnapshot {
		e.report(Reliable, "new target (no resume index) got progress %d before any snapshot", p)
		e.needSnapshot = false
		e.pos, e.posValid = p, true
		return
	}
	if e.posValid && p < e.pos {
		e.report(Ordered, "progress %d after %d", p, e.pos)
		return
	}
	if e.posValid {
		e.gap(e.pos, p, true)
	}
	e.pos, e.posValid = p, true
}

func (e *evaluator) snapBegin(ev event) {
	if e.inSnap {
		e.report(Ordered, "snapshot begin %d inside the snapshot at %d", ev.index, e.snapX)
	}
	if !e.needSnapshot && !e.resync {
		e.report(Unique, "snapshot at %d re-sends state on a session resumed from %d without resync-required", ev.index, e.resume)
	}
	e.inSnap, e.snapX, e.snapViews, e.snapLast = true, ev.index, newViewSet(ev.views), -1
	e.snapKeys = map[string]Entry{}
}

func (e *evaluator) snapBatch(entries []Entry) {
	for _, en := range entries {
		if en.Index <= e.snapLast {
			e.report(Ordered, "snapshot entry %d after %d", en.Index, e.snapLast)
		}
		if en.Index > e.snapX {
			e.report(Ordered, "snapshot entry %d beyond the snapshot index %d", en.Index, e.snapX)
		}
		if k := kindOf(en.Kind); k != KindRow && k != KindPosition {
			e.report(Resumable, "snapshot entry %d is a control record (%s)", en.Index, en.Kind)
		}
		if en.Tombstone {
			e.report(Reliable, "snapshot entry %d is a tombstone (key %q)", en.Index, en.Key)
		}
		if !e.snapViews.wantsEntry(en) {
			e.report(Resumable, "snapshot entry %d of view %q outside the snapshot's views", en.Index, en.View)
		}
		if _, dup := e.snapKeys[en.Key]; dup {
			e.report(Unique, "snapshot at %d holds key %q twice", e.snapX, en.Key)
		}
		if r, ok := e.tr.byIndex[en.Index]; ok && e.tr.known && !en.Tombstone && !e.passes(r) {
			e.report(Resumable, "snapshot entry %d of key %q does not pass the target's selection of view %q", en.Index, en.Key, en.View)
		}
		e.matchTruth(en)
		e.snapKeys[en.Key] = en
		if en.Index > e.snapLast {
			e.snapLast = en.Index
		}
	}
}

func (e *evaluator) snapEnd(x int64) {
	if !e.inSnap {
		e.report(Ordered, "snapshot end %d without begin", x)
		return
	}
	if x != e.snapX {
		e.report(Ordered, "snapshot end %d does not match its begin %d", x, e.snapX)
	}
	e.checkSnapshotContent()
	if e.resync {
		// The snapshot replaced the state the resume index described (a resync: the log
		// start moved past it, the topic was created again, ...): the entries that follow
		// are bound by the snapshot's index, not by the resume index any more.
		e.hasResume = false
	}
	e.inSnap, e.needSnapshot, e.resync = false, false, false
	e.held = map[string]bool{}
	for k, en := range e.snapKeys {
		if kindOf(en.Kind) == KindRow && e.selectionOf(en.View) != nil {
			e.held[k] = true
		}
	}
	e.lineage = map[int64]bool{}
	e.base, e.claim = e.snapX, -1
	e.pos, e.posValid = e.snapX, true
}

// checkSnapshotContent compares the snapshot with the state at X for the keys whose whole
// history in the truth is <= X (later writes may have compacted the value at X away).
func (e *evaluator) checkSnapshotContent() {
	if !e.tr.known {
		return
	}
	var missing, stale, deleted []string
	for key, r := range e.tr.lastRow {
		if r.Index > e.snapX || !e.snapViews.has(r.View) {
			continue
		}
		got, ok := e.snapKeys[key]
		switch {
		case r.Tombstone && ok:
			deleted = append(deleted, fmt.Sprintf("%q@%d", key, got.Index))
		case !r.Tombstone && !ok && !e.passes(r):
			// Not selected: rightly absent (one present is checked at its entry).
		case !r.Tombstone && !ok:
			missing = append(missing, fmt.Sprintf("%q@%d", key, r.Index))
		case !r.Tombstone && got.Index != r.Index:
			stale = append(stale, fmt.Sprintf("%q@%d (want %d)", key, got.Index, r.Index))
		}
	}
	// The latest position record <= X (ends the source transactions up to it, carries the
	// source position): every snapshot holds it, whatever its views.
	if p := e.tr.lastPos; p != nil && p.Index <= e.snapX {
		got, ok := e.snapKeys[p.Key]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%q@%d", p.Key, p.Index))
		case got.Index != p.Index:
			stale = append(stale, fmt.Sprintf("%q@%d (want %d)", p.Key, got.Index, p.Index))
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	slices.Sort(deleted)
	if len(missing) > 0 {
		e.report(Reliable, "snapshot at %d lacks %d live key(s): %s", e.snapX, len(missing), short(missing))
	}
	if len(stale) > 0 {
		e.report(Reliable, "snapshot at %d holds %d stale value(s): %s", e.snapX, len(stale), short(stale))
	}
	if len(deleted) > 0 {
		e.report(Reliable, "snapshot at %d holds %d deleted key(s): %s", e.snapX, len(deleted), short(deleted))
	}
}

func (e *evaluator) reliableAtEnd() {
	if e.session == 0 {
		return
	}
	if e.inSnap {
		e.report(Reliable, "the snapshot at %d never completed", e.snapX)
		return
	}
	if e.needSnapshot {
		e.report(Reliable, "new target never received its snapshot")
		return
	}
	if !e.tr.known {
		return
	}
	var miss []Record
	floor := max(e.base, e.claim)
	for _, r := range e.tr.between(e.views, floor, e.tr.end(), true) {
		if !e.lineage[r.Index] && !e.optional(r) && (!e.selected(r) || e.passes(r)) {
			miss = append(miss, r)
		}
	}
	if len(miss) > 0 {
		e.report(Reliable, "%d record(s) of its views up to %d never delivered nor covered by a snapshot or resume index (%d): %s",
			len(miss), e.tr.end(), floor, indexes(miss))
		return
	}
	e.selectedStateAtEnd()
}

// selectedStateAtEnd compares what the target holds of its selected views with the rows
// of the truth that pass: exactly those, no more, no fewer.
func (e *evaluator) selectedStateAtEnd() {
	if len(e.sels) == 0 || !e.posValid || e.pos < e.tr.end() {
		return
	}
	var lacks, extra []string
	for key, r := range e.tr.lastRow {
		if !e.selected(r) || !e.views.has(r.View) {
			continue
		}
		switch want, got := e.passes(r), e.held[key]; {
		case want && !got:
			lacks = append(lacks, fmt.Sprintf("%q@%d", key, r.Index))
		case !want && got:
			extra = append(extra, fmt.Sprintf("%q@%d", key, r.Index))
		}
	}
	slices.Sort(lacks)
	slices.Sort(extra)
	if len(lacks) > 0 {
		e.report(Reliable, "at the end the target lacks %d row(s) that pass its selection: %s", len(lacks), short(lacks))
	}
	if len(extra) > 0 {
		e.report(Reliable, "at the end the target holds %d key(s) whose row does not pass its selection (a move out not delivered): %s", len(extra), short(extra))
	}
}

func indexes(rs []Record) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r.Index)
	}
	return short(s)
}

func short(s []string) string {
	const max = 8
	if len(s) > max {
		return strings.Join(s[:max], ",") + fmt.Sprintf(",… (%d more)", len(s)-max)
	}
	return strings.Join(s, ",")
}
