package cacheclient

import (
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
	e     *edit
	cur   *viewState[T] // working version of the current batch, published by commit
	dirty bool

	// Accounting over every live row of the view, decoded or not (epoch check).
	hashSum uint64
	rows    int64
	bad     map[string]item[T] // rows the decoder refused: not visible, still accounted
	bytes   int64              // key + value bytes of the live rows (memory estimate)

	changes []Change[T]

	// Snapshot replacement in progress (SnapshotBegin .. SnapshotEnd, or a StateDir load).
	staging *stagingView[T]
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

// begin starts a batch transaction.
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
	w.cur, w.e, w.dirty = &cur, new(edit), false
}

// commit publishes the batch's version at stream position pos. Readers switch to it
// atomically.
func (v *View[T]) commit(pos int64) {
	w := &v.w
	if w.cur == nil {
		if v.state.Load().position >= pos {
			return
		}
		v.begin()
	}
	w.cur.position = pos
	v.state.Store(w.cur)
	v.mem.Store(w.bytes)
	w.cur, w.e = nil, nil
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

// removeLive deletes r's key from the batch's version cur if it holds a live object there
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
	w.unaccount(r.key, o)
	v.reindex(cur, w.e, r.key, &o.obj, nil)
	w.change(v, Change[T]{Key: r.key, Op: OpDelete, Old: o.obj, Position: r.index})
	return true
}

// applyRow applies one row entry to the current batch transaction.
func (v *View[T]) applyRow(r row) {
	v.begin()
	w := &v.w
	w.dirty = true
	cur := w.cur
	h := hashKey(r.key)
	if r.tombstone {
		if !v.removeLive(cur, r, h) {
			if b, ok := w.bad[r.key]; ok {
				delete(w.bad, r.key)
				w.unaccount(r.key, b)
			}
		}
		return
	}
	it := item[T]{rowhash: v.rowHash(&r), raw: v.keep(&r)}
	obj, err := v.decode(r.key, r.value)
	if b, ok := w.bad[r.key]; ok {
		delete(w.bad, r.key)
		w.unaccount(r.key, b)
	}
	if err != nil {
		v.c.decodeError(v.name, r.key, r.index, err)
		v.removeLive(cur, r, h)
		w.bad[r.key] = it
		w.account(r.key, it)
		return
	}
	it.obj = obj
	var old item[T]
	var had bool
	cur.root, old, had = cur.root.put(w.e, r.key, h, 0, it)
	w.account(r.key, it)
	if had {
		w.unaccount(r.key, old)
		v.reindex(cur, w.e, r.key, &old.obj, &it.obj)
		if old.rowhash != it.rowhash {
			w.change(v, Change[T]{Key: r.key, Op: OpUpdate, Old: old.obj, New: obj, Position: r.index})
		}
		return
	}
	cur.count++
	v.reindex(cur, w.e, r.key, nil, &it.obj)
	w.change(v, Change[T]{Key: r.key, Op: OpCreate, New: obj, Position: r.index})
}

func (w *viewWriter[T]) account(key string, it item[T]) {
	w.hashSum += it.rowhash
	w.rows++
	w.bytes += int64(len(key) + it.rawLen())
}

func (w *viewWriter[T]) unaccount(key string, it item[T]) {
	w.hashSum -= it.rowhash
	w.rows--
	w.bytes -= int64(len(key) + it.rawLen())
}

func (w *viewWriter[T]) change(v *View[T], c Change[T]) {
	if !v.wantChanges() {
		return
	}
	c.View = v.name
	w.changes = append(w.changes, c)
}

// reindex updates every secondary index for key from old to new (nil = absent).
func (v *View[T]) reindex(s *viewState[T], e *edit, key string, old, new *T) {
	for i, fn := range v.indexFns {
		var ov, nv []string
		if old != nil {
			ov = fn(*old)
		}
		if new != nil {
			nv = fn(*new)
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

// takeChanges returns and clears the changes collected since the last call.
func (v *View[T]) takeChanges() []Change[T] {
	c := v.w.changes
	v.w.changes = nil
	return c
}

// epochState returns the row count and epoch hash of what the view holds (decoded or not).
func (v *View[T]) epochState() (rows int64, hash uint64) { return v.w.rows, v.w.hashSum }
