package cacheclient

import (
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
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
	View  string
	Key   string
	Op    Op
	Old   T // zero for OpCreate
	New   T // zero for OpDelete
	Index int64
}

// row is one row entry of a batch, after the client parsed the key. It is passed by value
// (no allocation per row).
type row struct {
	key       string // key text (record key without the view prefix)
	fullKey   []byte // the record key, for the row hash; nil: prefix + key
	prefix    []byte
	value     []byte
	tombstone bool
	index     int64
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

type stagingView[T any] struct {
	list stagedList[T] // every snapshot row in arrival order; the trie is built at the end
	bad  map[string]item[T]
	// Filled by build.
	root    *tnode[item[T]]
	count   int
	hashSum uint64
	rows    int64
	bytes   int64
}

// staged is one snapshot row waiting for the bulk build.
type staged[T any] struct {
	sk    uint64 // trie order of the key's hash (see trieOrder)
	l     leaf[item[T]]
	value []byte // decoded at build, in parallel, for the last row of each key only
	index int64
	tomb  bool
	err   error
}

var zeroByte = []byte{0}

// hash returns the row hash of r.
func (r *row) hash() uint64 {
	if r.fullKey != nil {
		return rowHash(r.fullKey, r.value)
	}
	var d xxhash.Digest
	d.Reset()
	d.Write(r.prefix)
	d.WriteString(r.key)
	d.Write(zeroByte)
	d.Write(r.value)
	return d.Sum64()
}

// rowHash is record.RowHash: xxhash64(key || 0x00 || value), without allocating.
func rowHash(fullKey, value []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.Write(fullKey)
	d.Write(zeroByte)
	d.Write(value)
	return d.Sum64()
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

// commit publishes the batch's version with its index. Readers switch to it atomically.
func (v *View[T]) commit(index int64) {
	w := &v.w
	if w.cur == nil {
		if v.state.Load().index >= index {
			return
		}
		v.begin()
	}
	w.cur.index = index
	v.state.Store(w.cur)
	v.mem.Store(w.bytes)
	w.cur, w.e = nil, nil
}

func (v *View[T]) keep(r *row) *string {
	if v.c != nil && v.c.keepRaw {
		s := string(r.value)
		return &s
	}
	return nil
}

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

// applyRow applies one row entry to the current batch transaction.
func (v *View[T]) applyRow(r row) {
	v.begin()
	w := &v.w
	w.dirty = true
	cur := w.cur
	h := hashKey(r.key)
	if r.tombstone {
		if old, ok := cur.root.get(r.key, h); ok {
			o := *old
			cur.root, _, _ = cur.root.del(w.e, r.key, h, 0)
			cur.count--
			w.unaccount(r.key, o)
			v.reindex(cur, w.e, r.key, &o.obj, nil)
			w.change(v, Change[T]{Key: r.key, Op: OpDelete, Old: o.obj, Index: r.index})
		} else if b, ok := w.bad[r.key]; ok {
			delete(w.bad, r.key)
			w.unaccount(r.key, b)
		}
		return
	}
	it := item[T]{rowhash: r.hash(), raw: v.keep(&r)}
	obj, err := v.decode(r.key, r.value)
	if b, ok := w.bad[r.key]; ok {
		delete(w.bad, r.key)
		w.unaccount(r.key, b)
	}
	if err != nil {
		v.c.decodeError(v.name, r.key, r.index, err)
		if old, ok := cur.root.get(r.key, h); ok {
			o := *old
			cur.root, _, _ = cur.root.del(w.e, r.key, h, 0)
			cur.count--
			w.unaccount(r.key, o)
			v.reindex(cur, w.e, r.key, &o.obj, nil)
			w.change(v, Change[T]{Key: r.key, Op: OpDelete, Old: o.obj, Index: r.index})
		}
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
			w.change(v, Change[T]{Key: r.key, Op: OpUpdate, Old: old.obj, New: obj, Index: r.index})
		}
		return
	}
	cur.count++
	v.reindex(cur, w.e, r.key, nil, &it.obj)
	w.change(v, Change[T]{Key: r.key, Op: OpCreate, New: obj, Index: r.index})
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

// beginReplace starts building a new state that will replace the view at endReplace.
func (v *View[T]) beginReplace() {
	v.w.staging = &stagingView[T]{bad: map[string]item[T]{}}
}

// reserveReplace preallocates room for n snapshot rows (a state file knows its count).
func (v *View[T]) reserveReplace(n int) {
	if s := v.w.staging; s != nil && n > 0 && n < 1<<28 {
		s.list.reserve(n)
	}
}

func (v *View[T]) replacing() bool { return v.w.staging != nil }

// stageRow adds one snapshot row to the replacement state. Rows are decoded at once and
// collected; the trie is built in one pass at endReplace (no path copying, no garbage).
func (v *View[T]) stageRow(r row) {
	s := v.w.staging
	st := staged[T]{sk: trieOrder(hashKey(r.key)), tomb: r.tombstone, index: r.index}
	st.l.key = r.key
	if !r.tombstone {
		st.l.val = item[T]{rowhash: r.hash(), raw: v.keep(&r)}
		st.value = r.value
	}
	s.list.add(st)
}

// build sorts the staged rows into trie order, keeps the last row of each key and builds
// the trie bottom-up with exact-size nodes.
// pos is a staged row's place in trie order.
type pos struct {
	sk   uint64
	i    int32
	tomb bool
}

// radixSort sorts by sk, stable (equal keys keep their arrival order), in 8 byte passes,
// skipping the bytes every key shares.
func radixSort(a []pos) []pos {
	if len(a) < 256 {
		slices.SortStableFunc(a, func(x, y pos) int {
			if x.sk == y.sk {
				return 0
			}
			return cmpU64(x.sk, y.sk)
		})
		return a
	}
	var counts [8][256]int
	for i := range a {
		k := a[i].sk
		for b := 0; b < 8; b++ {
			counts[b][byte(k>>(8*b))]++
		}
	}
	tmp := make([]pos, len(a))
	src, dst := a, tmp
	for b := 0; b < 8; b++ {
		c := &counts[b]
		if c[byte(src[0].sk>>(8*b))] == len(a) {
			continue // every key has the same byte here
		}
		off := 0
		for v := 0; v < 256; v++ {
			n := c[v]
			c[v] = off
			off += n
		}
		for i := range src {
			v := byte(src[i].sk >> (8 * b))
			dst[c[v]] = src[i]
			c[v]++
		}
		src, dst = dst, src
	}
	return src
}

func (s *stagingView[T]) build(decode Decoder[T], decodeErr func(key string, index int64, err error)) {
	// Sort small (order, position) pairs rather than the rows themselves.
	order := make([]pos, s.list.n)
	for i := range order {
		st := s.list.at(i)
		order[i] = pos{st.sk, int32(i), st.tomb}
	}
	order = radixSort(order)
	// Equal hashes (the same key several times, or a rare full collision) are ordered by
	// key, then arrival, so that the last row of each key comes last in its run.
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && order[hi].sk == order[lo].sk {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(order[lo:hi], func(a, b pos) int {
				if c := strings.Compare(s.list.at(int(a.i)).l.key, s.list.at(int(b.i)).l.key); c != 0 {
					return c
				}
				return int(a.i - b.i)
			})
		}
		lo = hi
	}
	// The last row of each key wins (keys are compared only when their hashes are equal).
	win := make([]int32, 0, len(order))
	for n, p := range order {
		if n+1 < len(order) && order[n+1].sk == p.sk && s.list.at(int(order[n+1].i)).l.key == s.list.at(int(p.i)).l.key {
			continue
		}
		if !p.tomb {
			win = append(win, p.i)
		}
	}
	// Decode in arrival order (sequential memory) on every core: decoders are pure. Rows
	// superseded within the snapshot are decoded too (rare: a snapshot has one row per key).
	parallelChunks(s.list.n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if st := s.list.at(i); !st.tomb {
				st.l.val.obj, st.err = decode(st.l.key, st.value)
				st.value = nil
			}
		}
	})
	leaves := make([]leaf[item[T]], 0, len(win))
	hs := make([]uint64, 0, len(win))
	for _, i := range win {
		st := s.list.at(int(i))
		if st.err != nil {
			decodeErr(st.l.key, st.index, st.err)
			s.bad[st.l.key] = st.l.val
			continue
		}
		leaves = append(leaves, st.l)
		hs = append(hs, st.sk)
		s.hashSum += st.l.val.rowhash
		s.bytes += int64(len(st.l.key) + st.l.val.rawLen())
	}
	s.list = stagedList[T]{}
	s.count = len(leaves)
	s.rows = int64(len(leaves))
	for k, it := range s.bad {
		s.hashSum += it.rowhash
		s.rows++
		s.bytes += int64(len(k) + it.rawLen())
	}
	if len(leaves) > 0 {
		s.root = buildTrie(leaves, hs, 0)
	}
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// endReplace publishes the replacement state at index, with its indexes rebuilt, and
// records the changes between the old and the new state (keys absent from the snapshot
// are deleted).
func (v *View[T]) endReplace(index int64) {
	s := v.w.staging
	v.w.staging = nil
	s.build(v.decode, func(key string, index int64, err error) { v.c.decodeError(v.name, key, index, err) })
	if v.w.cur != nil { // a live batch never overlaps a replacement; be safe
		v.w.cur, v.w.e = nil, nil
	}
	old := v.state.Load()
	ns := &viewState[T]{root: s.root, count: s.count, index: index, idx: v.buildIndexes(s.root)}
	if v.wantChanges() {
		ns.root.each(func(k string, it *item[T]) bool {
			if o, ok := old.root.get(k, hashKey(k)); !ok {
				v.w.change(v, Change[T]{Key: k, Op: OpCreate, New: it.obj, Index: index})
			} else if o.rowhash != it.rowhash {
				v.w.change(v, Change[T]{Key: k, Op: OpUpdate, Old: o.obj, New: it.obj, Index: index})
			}
			return true
		})
		old.root.each(func(k string, it *item[T]) bool {
			if _, ok := ns.root.get(k, hashKey(k)); !ok {
				v.w.change(v, Change[T]{Key: k, Op: OpDelete, Old: it.obj, Index: index})
			}
			return true
		})
	}
	v.w.hashSum, v.w.rows, v.w.bad, v.w.bytes = s.hashSum, s.rows, s.bad, s.bytes
	v.state.Store(ns)
	v.mem.Store(s.bytes)
}

// abortReplace drops a replacement in progress (the stream broke before SnapshotEnd).
func (v *View[T]) abortReplace() { v.w.staging = nil }

// epochState returns the row count and epoch hash of what the view holds (decoded or not).
func (v *View[T]) epochState() (rows int64, hash uint64) { return v.w.rows, v.w.hashSum }

// buildIndexes builds every secondary index of a whole new version in one pass per index:
// (value, key) pairs sorted in trie order, each value's key set and the value trie built
// bottom-up (see buildTrie).
func (v *View[T]) buildIndexes(root *tnode[item[T]]) []*tnode[*keySet] {
	out := make([]*tnode[*keySet], len(v.indexFns))
	type pair struct {
		vo, ko   uint64
		val, key string
	}
	for i, fn := range v.indexFns {
		var ps []pair
		root.each(func(k string, it *item[T]) bool {
			vals := fn(it.obj)
			ko := uint64(0)
			for j, val := range vals {
				if slices.Contains(vals[:j], val) {
					continue
				}
				if ko == 0 {
					ko = trieOrder(hashKey(k))
				}
				ps = append(ps, pair{trieOrder(hashKey(val)), ko, val, k})
			}
			return true
		})
		slices.SortFunc(ps, func(a, b pair) int {
			switch {
			case a.vo != b.vo:
				return cmpU64(a.vo, b.vo)
			case a.val != b.val:
				return strings.Compare(a.val, b.val)
			case a.ko != b.ko:
				return cmpU64(a.ko, b.ko)
			}
			return strings.Compare(a.key, b.key)
		})
		var outer []leaf[*keySet]
		var outerOrd []uint64
		var keys []leaf[struct{}]
		var keyOrd []uint64
		for j := 0; j < len(ps); {
			k := j
			keys, keyOrd = keys[:0], keyOrd[:0]
			for ; k < len(ps) && ps[k].val == ps[j].val; k++ {
				keys = append(keys, leaf[struct{}]{key: ps[k].key})
				keyOrd = append(keyOrd, ps[k].ko)
			}
			outer = append(outer, leaf[*keySet]{key: ps[j].val, val: buildTrie(keys, keyOrd, 0)})
			outerOrd = append(outerOrd, ps[j].vo)
			j = k
		}
		if len(outer) > 0 {
			out[i] = buildTrie(outer, outerOrd, 0)
		}
	}
	return out
}

// parallelChunks runs fn over [0, n) split in GOMAXPROCS chunks, one goroutine each, and
// waits for them (small inputs run inline).
func parallelChunks(n int, fn func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	if n < 4096 || p == 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + p - 1) / p
	for lo := 0; lo < n; lo += step {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+step, n))
	}
	wg.Wait()
}

// stagedList stores snapshot rows in fixed-size chunks: appending never copies what is
// already there (a snapshot's size is not known in advance).
type stagedList[T any] struct {
	chunks [][]staged[T]
	n      int
}

const stagedChunk = 1 << 12

func (l *stagedList[T]) add(st staged[T]) {
	if l.n%stagedChunk == 0 && l.n/stagedChunk == len(l.chunks) {
		l.chunks = append(l.chunks, make([]staged[T], 0, stagedChunk))
	}
	c := &l.chunks[l.n/stagedChunk]
	*c = append(*c, st)
	l.n++
}

func (l *stagedList[T]) at(i int) *staged[T] { return &l.chunks[i/stagedChunk][i%stagedChunk] }

// reserve allocates the chunks for n more rows at once.
func (l *stagedList[T]) reserve(n int) {
	for need := (l.n + n + stagedChunk - 1) / stagedChunk; len(l.chunks) < need; {
		l.chunks = append(l.chunks, make([]staged[T], 0, stagedChunk))
	}
}
