package cacheclient

import (
	"maps"
	"slices"
	"unsafe"

	"github.com/statecast/statecast/schemas/record"
)

// Op is the kind of a change.
type Op uint8

const (
	// OpCreate: the key was absent (Old is the zero value).
	OpCreate Op = iota + 1
	// OpUpdate: the key's object changed.
	OpUpdate
	// OpDelete: the key was removed (New is the zero value).
	OpDelete
)

func (o Op) String() string {
	switch o {
	case OpCreate:
		return "create"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return "op?"
}

// Change is one applied change of a view, handed to change handlers after the batch that
// contains it has been published (a handler's Get sees it, or something newer).
type Change[T any] struct {
	View string
	Key  string
	Op   Op
	Old  T // zero for OpCreate
	New  T // zero for OpDelete
	// Position is the change's stream position (the record's index in the stream): that of
	// the record that made it, or the snapshot's position for a change a snapshot made.
	Position int64
}

// row is one row entry of a batch, after the client parsed the key. It is passed by value
// (no allocation per row).
type row struct {
	key       string // key text (record key without the view prefix)
	fullKey   []byte // the record key, for the row hash; nil: the view's prefix + key
	value     []byte
	tombstone bool
	index     int64
	// stable: value is never modified nor reused (a state file's buffer, a received
	// message's own bytes), so the raw value kept for the state file may alias it.
	stable bool
}

// viewWriter is the connection goroutine's side of a view. Nothing in it is read by readers.
type viewWriter[T any] struct {
	e *edit
	// cur is the working version: the published one plus every change applied since (a
	// batch, or a source transaction staged across several batches), published by commit
	// or dropped by rollback. Its nodes created under e are mutated in place.
	cur      *viewState[T]
	badOwned bool // cur.bad is a copy of the working version's own (the published map is shared)

	changes   []Change[T] // changes of the working version
	published []Change[T] // changes of published versions, not handed to the handlers yet

	// Snapshot replacement in progress (SnapshotBegin .. SnapshotEnd, or a StateDir load).
	staging *stagingView[T]

	// Index values of the row being applied, reused from row to row.
	newVals, oldVals [][]string
}

// rowHash returns the row hash of r (record.RowHash of its record key and value).
func (v *View[T]) rowHash(r *row) uint64 {
	if r.fullKey != nil {
		return record.RowHash(r.fullKey, r.value)
	}
	return record.RowHashPrefixed(v.prefix, r.key, r.value)
}

func (v *View[T]) viewName() string { return v.name }

func (v *View[T]) wantChanges() bool { return len(v.handlers) > 0 }

// begin starts the working version from the published one, unless one is open.
func (v *View[T]) begin() {
	w := &v.w
	if w.cur != nil {
		return
	}
	pub := v.state.Load()
	cur := *pub
	cur.idx = slices.Clone(pub.idx)
	if len(cur.idx) < len(v.indexFns) {
		cur.idx = append(cur.idx, make([]*tnode[*keySet], len(v.indexFns)-len(cur.idx))...)
	}
	w.cur, w.e, w.badOwned = &cur, new(edit), false
}

// commit publishes the working version at stream position pos (readers switch to it
// atomically) and returns the version now published; with no working version it only
// moves the published position forward. The working version's changes become the
// handlers' (flushChanges). The client calls it for every view at once (Client.publish).
func (v *View[T]) commit(pos int64) any {
	w := &v.w
	if w.cur == nil {
		if pub := v.state.Load(); pub.position >= pos {
			return pub
		}
		v.begin()
	}
	cur := w.cur
	cur.position = pos
	v.state.Store(cur)
	v.mem.Store(cur.bytes)
	w.cur, w.e = nil, nil
	if w.published == nil {
		w.published, w.changes = w.changes, nil
	} else {
		w.published = append(w.published, w.changes...)
		w.changes = nil
	}
	return cur
}

// rollback drops the working version and its changes: what was staged since the last
// publication (a source transaction cut by the end of the stream) was never visible.
func (v *View[T]) rollback() {
	w := &v.w
	w.cur, w.e, w.changes = nil, nil, nil
}

func (v *View[T]) keep(r *row) *string {
	if v.c != nil && v.c.keepRaw {
		s := r.valueString()
		return &s
	}
	return nil
}

// valueString is the row's value as a string: aliased when stable, else copied.
func (r *row) valueString() string {
	if r.stable {
		return aliasString(r.value)
	}
	return string(r.value)
}

// aliasString returns b as a string without copying it. b must never be modified
// afterwards (nor reused): the string shares its bytes and keeps them alive.
func aliasString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (it *item[T]) rawLen() int {
	if it.raw == nil {
		return 0
	}
	return len(*it.raw)
}

func (it *item[T]) rawString() string {
	if it.raw == nil {
		return ""
	}
	return *it.raw
}

// removeLive deletes r's key from the working version cur if it holds a live object there
// (count, memory accounting, secondary indexes and a delete event included) and reports
// whether it did.
func (v *View[T]) removeLive(cur *viewState[T], r row, h uint64) bool {
	w := &v.w
	old, ok := cur.root.get(r.key, h)
	if !ok {
		return false
	}
	o := *old
	cur.root, _, _ = cur.root.del(w.e, r.key, h, 0)
	cur.count--
	cur.unaccount(r.key, o)
	v.reindexVals(cur, w.e, r.key, &o.obj, nil)
	w.change(v, Change[T]{Key: r.key, Op: OpDelete, Old: o.obj, Position: r.index})
	return true
}

// ownBad makes the working version's map of refused rows its own before a change (the
// published versions share theirs, immutable) and returns it.
func (v *View[T]) ownBad() map[string]item[T] {
	w := &v.w
	if !w.badOwned {
		w.cur.bad = maps.Clone(w.cur.bad)
		if w.cur.bad == nil {
			w.cur.bad = map[string]item[T]{}
		}
		w.badOwned = true
	}
	return w.cur.bad
}

// unbad forgets a refused row of key in the working version, if there is one.
func (v *View[T]) unbad(key string) {
	cur := v.w.cur
	if b, ok := cur.bad[key]; ok {
		delete(v.ownBad(), key)
		cur.unaccount(key, b)
	}
}

// applyRow applies one row entry to the working version.
func (v *View[T]) applyRow(r row) {
	v.begin()
	w := &v.w
	cur := w.cur
	h := hashKey(r.key)
	if r.tombstone {
		if !v.removeLive(cur, r, h) {
			v.unbad(r.key)
		}
		return
	}
	it := item[T]{rowhash: v.rowHash(&r), raw: v.keep(&r)}
	obj, err := v.decodeRow(r.key, r.value)
	var vals [][]string
	if err == nil {
		// The new object's index values before anything changes: an index function that
		// panics refuses the row like its decoder would.
		vals, err = v.indexValues(w.newVals, r.key, &obj)
		w.newVals = vals
	}
	v.unbad(r.key)
	if err != nil {
		v.decodeFailed(r.key, r.index, err)
		v.removeLive(cur, r, h)
		v.ownBad()[r.key] = it
		cur.account(r.key, it)
		return
	}
	it.obj = obj
	var old item[T]
	var had bool
	cur.root, old, had = cur.root.put(w.e, r.key, h, 0, it)
	cur.account(r.key, it)
	if had {
		cur.unaccount(r.key, old)
		v.reindexVals(cur, w.e, r.key, &old.obj, vals)
		if old.rowhash != it.rowhash {
			w.change(v, Change[T]{Key: r.key, Op: OpUpdate, Old: old.obj, New: obj, Position: r.index})
		}
		return
	}
	cur.count++
	v.reindexVals(cur, w.e, r.key, nil, vals)
	w.change(v, Change[T]{Key: r.key, Op: OpCreate, New: obj, Position: r.index})
}

func (s *viewState[T]) account(key string, it item[T]) {
	s.hashSum += it.rowhash
	s.rows++
	s.bytes += int64(len(key) + it.rawLen())
}

func (s *viewState[T]) unaccount(key string, it item[T]) {
	s.hashSum -= it.rowhash
	s.rows--
	s.bytes -= int64(len(key) + it.rawLen())
}

func (w *viewWriter[T]) change(v *View[T], c Change[T]) {
	if !v.wantChanges() {
		return
	}
	c.View = v.name
	w.changes = append(w.changes, c)
}

// reindexVals updates every secondary index for key from the object old (nil = absent)
// to the values nvals (nil = absent; indexValues of the new object). The old object's
// values are computed again: its index functions succeeded when it was indexed; if one
// panics now (it is not pure), its values stay indexed and the panic is counted.
func (v *View[T]) reindexVals(s *viewState[T], e *edit, key string, old *T, nvals [][]string) {
	var ovals [][]string
	if old != nil && len(v.indexFns) > 0 {
		var err error
		if ovals, err = v.indexValues(v.w.oldVals, key, old); err != nil {
			ovals = nil
		} else {
			v.w.oldVals = ovals
		}
	}
	for i := range v.indexFns {
		var ov, nv []string
		if ovals != nil {
			ov = ovals[i]
		}
		if nvals != nil {
			nv = nvals[i]
		}
		for _, val := range ov {
			if !slices.Contains(nv, val) {
				s.idx[i] = indexDel(s.idx[i], e, val, key)
			}
		}
		for _, val := range nv {
			if !slices.Contains(ov, val) {
				s.idx[i] = indexAdd(s.idx[i], e, val, key)
			}
		}
	}
}

func indexAdd(idx *tnode[*keySet], e *edit, val, key string) *tnode[*keySet] {
	vh := hashKey(val)
	var set *keySet
	if p, ok := idx.get(val, vh); ok {
		set = *p
	}
	ns, _, _ := set.put(e, key, hashKey(key), 0, struct{}{})
	if ns != set {
		idx, _, _ = idx.put(e, val, vh, 0, ns)
	}
	return idx
}

func indexDel(idx *tnode[*keySet], e *edit, val, key string) *tnode[*keySet] {
	vh := hashKey(val)
	p, ok := idx.get(val, vh)
	if !ok {
		return idx
	}
	set := *p
	ns, _, removed := set.del(e, key, hashKey(key), 0)
	switch {
	case !removed:
	case ns == nil: // empty sets are removed
		idx, _, _ = idx.del(e, val, vh, 0)
	case ns != set:
		idx, _, _ = idx.put(e, val, vh, 0, ns)
	}
	return idx
}

// takeChanges returns and clears the changes of the versions published since the last call.
func (v *View[T]) takeChanges() []Change[T] {
	c := v.w.published
	v.w.published = nil
	return c
}

// epochState returns the row count and epoch hash of what the view holds (decoded or not)
// in its working version: everything applied, published or staged.
func (v *View[T]) epochState() (rows int64, hash uint64) {
	s := v.w.cur
	if s == nil {
		s = v.state.Load()
	}
	return s.rows, s.hashSum
}
