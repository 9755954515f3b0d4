package cacheclient

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/statecast/statecast/schemas/record"
)

// Snapshots (bootstrap, resync, state file) are not applied row by row: their rows are
// staged raw in chunks; at the end they are decoded on every core, sorted in trie order
// and built bottom-up in one pass, and the new version replaces the old one atomically at
// endReplace.

type stagingView[T any] struct {
	list stagedList[T] // every snapshot row in arrival order; the trie is built at the end
	bad  map[string]item[T]

	decode   Decoder[T]
	prefix   []byte // the view's key prefix, for the row hash
	keepRaw  bool   // keep each row's raw value for the state file (StateDir)
	prepared int    // chunks already prepared (loadRows prepares them as it reads)
	// Filled by build.
	root    *tnode[item[T]]
	count   int
	hashSum uint64
	rows    int64
	bytes   int64
}

// staged is one snapshot row waiting for the bulk build. Receiving (or reading a state
// file) only fills key, value, index and tomb; a chunk worker (prepare) computes the rest
// on every core at the end.
type staged[T any] struct {
	sk    uint64 // trie order of the key's hash (see trieOrder); set by prepare
	l     leaf[item[T]]
	value []byte // the raw value until prepare decoded it
	index int64
	tomb  bool
	err   error
}

// beginReplace starts building a new state that will replace the view at endReplace.
func (v *View[T]) beginReplace() {
	v.w.staging = &stagingView[T]{bad: map[string]item[T]{}, decode: v.decodeRow, prefix: v.prefix,
		keepRaw: v.c != nil && v.c.keepRaw}
}

// prepareAll prepares the chunks not prepared yet on every core, once receiving is over:
// receiving only collects rows, so that the receiver never waits for the decoder and the
// decoding runs on every core at once.
func (s *stagingView[T]) prepareAll() {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, c := range s.list.chunks[s.prepared:] {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.prepare(c)
		}()
	}
	wg.Wait()
	s.prepared = len(s.list.chunks)
}

// prepare computes the trie order, row hash and kept raw value of a chunk's rows and
// decodes them. Each chunk is prepared by one worker; workers write only their chunk.
func (s *stagingView[T]) prepare(c []staged[T]) {
	var raws []string // one slab per chunk (never grown: pointers into it stay valid)
	if s.keepRaw {
		raws = make([]string, 0, len(c))
	}
	for i := range c {
		st := &c[i]
		st.sk = trieOrder(hashKey(st.l.key))
		if st.tomb {
			continue
		}
		st.l.val.rowhash = record.RowHashPrefixed(s.prefix, st.l.key, st.value)
		if s.keepRaw {
			// The value is stable (a received message's own bytes or the state file's
			// buffer, see stageRow): the kept raw value aliases it.
			raws = append(raws, aliasString(st.value))
			st.l.val.raw = &raws[len(raws)-1]
		}
		st.l.val.obj, st.err = s.decode(st.l.key, st.value)
		st.value = nil
	}
}

// loadRows stages the rows of a verified state file's view (see verifyState) on every
// core, in place of a sequence of stageRow: worker after worker takes a chunk, parses its
// rows from body (chunk j starts at offs[j]; keys and values alias body) and prepares
// them. endReplace then builds the view.
func (v *View[T]) loadRows(body []byte, offs []int, rows int) {
	v.beginReplace()
	s := v.w.staging
	s.list.chunks = make([][]staged[T], len(offs))
	s.list.n = rows
	s.prepared = len(offs) // every chunk is prepared here
	str := func(p int) ([]byte, int) {
		n, k := binary.Uvarint(body[p:])
		p += k
		return body[p : p+int(n)], p + int(n)
	}
	var wg sync.WaitGroup
	var next atomic.Int32
	for range min(runtime.GOMAXPROCS(0), len(offs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < len(offs); j = int(next.Add(1) - 1) {
				c := make([]staged[T], min(stagedChunk, rows-j*stagedChunk))
				p := offs[j]
				for i := range c {
					var key []byte
					key, p = str(p)
					c[i].value, p = str(p)
					c[i].l.key = aliasString(key)
					c[i].index = -1
				}
				s.prepare(c)
				s.list.chunks[j] = c
			}
		}()
	}
	wg.Wait()
}

// reserveReplace preallocates room for n snapshot rows (a state file knows its count).
func (v *View[T]) reserveReplace(n int) {
	if s := v.w.staging; s != nil && n > 0 && n < 1<<28 {
		s.list.reserve(n)
	}
}

func (v *View[T]) replacing() bool { return v.w.staging != nil }

// stageRow adds one snapshot row to the replacement state. Rows are only collected here;
// hashing, decoding and the trie are done at endReplace on every core (no path copying,
// no garbage).
func (v *View[T]) stageRow(r row) {
	s := v.w.staging
	st := staged[T]{tomb: r.tombstone, index: r.index}
	st.l.key = r.key
	if !r.tombstone {
		st.value = r.value
		if !r.stable {
			st.value = bytes.Clone(r.value) // kept until prepare (and beyond with StateDir)
		}
	}
	s.list.add(st)
}

// pos is a staged row's place in trie order.
type pos struct {
	sk   uint64
	i    int32
	tomb bool
	bad  bool // the decoder refused it
}

// radixSort sorts by sk, stable (equal keys keep their arrival order, a's i increasing).
// It sorts by the 32 most significant bits in 4 byte passes (skipping the bytes every key
// shares), then sorts the rare runs that share them by the whole sk and i: for hashes,
// 1,000,000 keys have ~100 such pairs.
func radixSort(a []pos) []pos {
	less := func(x, y pos) int {
		if x.sk != y.sk {
			return cmpU64(x.sk, y.sk)
		}
		return int(x.i - y.i)
	}
	if len(a) < 256 {
		slices.SortFunc(a, less)
		return a
	}
	var counts [4][256]int
	for i := range a {
		k := a[i].sk >> 32
		for b := 0; b < 4; b++ {
			counts[b][byte(k>>(8*b))]++
		}
	}
	tmp := make([]pos, len(a))
	src, dst := a, tmp
	for b := 0; b < 4; b++ {
		c := &counts[b]
		shift := 32 + 8*b
		if c[byte(src[0].sk>>shift)] == len(a) {
			continue // every key has the same byte here
		}
		off := 0
		for v := 0; v < 256; v++ {
			n := c[v]
			c[v] = off
			off += n
		}
		for i := range src {
			v := byte(src[i].sk >> shift)
			dst[c[v]] = src[i]
			c[v]++
		}
		src, dst = dst, src
	}
	for lo := 0; lo < len(src); {
		hi := lo + 1
		for hi < len(src) && src[hi].sk>>32 == src[lo].sk>>32 {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(src[lo:hi], less)
		}
		lo = hi
	}
	return src
}

// build prepares the staged rows on every core, sorts them into trie order, keeps the last
// row of each key and builds the trie bottom-up from them with exact-size nodes.
func (s *stagingView[T]) build(decodeErr func(key string, index int64, err error)) {
	s.prepareAll()
	// Sort small (order, position) pairs rather than the rows themselves. This pass reads
	// the rows in arrival order (sequential) and does their accounting, so that the passes
	// in trie order (random access) touch only the rare superseded or refused rows, and
	// buildTriePos each winner once.
	order := make([]pos, s.list.n)
	for i := range order {
		st := s.list.at(i)
		p := pos{sk: st.sk, i: int32(i), tomb: st.tomb}
		if !st.tomb {
			if st.err != nil {
				p.bad = true
			} else {
				s.hashSum += st.l.val.rowhash
				s.bytes += int64(len(st.l.key) + st.l.val.rawLen())
			}
		}
		order[i] = p
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
	// The last row of each key wins (keys are compared only when their hashes are equal);
	// rows the decoder refused are kept aside. win reuses order's array (it never
	// overtakes the reading position).
	win := order[:0]
	for n, p := range order {
		if n+1 < len(order) && order[n+1].sk == p.sk && s.list.at(int(order[n+1].i)).l.key == s.list.at(int(p.i)).l.key {
			if !p.tomb && !p.bad { // superseded: undo its accounting
				st := s.list.at(int(p.i))
				s.hashSum -= st.l.val.rowhash
				s.bytes -= int64(len(st.l.key) + st.l.val.rawLen())
			}
			continue
		}
		switch {
		case p.tomb:
		case p.bad:
			st := s.list.at(int(p.i))
			decodeErr(st.l.key, st.index, st.err)
			s.bad[st.l.key] = st.l.val
		default:
			win = append(win, p)
		}
	}
	s.count = len(win)
	s.rows = int64(len(win))
	for k, it := range s.bad {
		s.hashSum += it.rowhash
		s.rows++
		s.bytes += int64(len(k) + it.rawLen())
	}
	if len(win) > 0 {
		s.root = buildTriePar(win, func(i int32) *leaf[item[T]] { return &s.list.at(int(i)).l }, runtime.GOMAXPROCS(0))
	}
	s.list = stagedList[T]{}
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// endReplace makes the replacement state, with its secondary indexes rebuilt, the view's
// working version at stream position pos (published with every other view by the client,
// Client.publish), and records the changes between the published state and the new one
// (keys absent from the snapshot are deleted). A working version staged before is dropped:
// the snapshot replaces it.
func (v *View[T]) endReplace(pos int64) {
	s := v.w.staging
	v.w.staging = nil
	s.build(func(key string, index int64, err error) { v.decodeFailed(key, index, err) })
	v.rollback()
	old := v.state.Load()
	idx := v.buildIndexesSafe(s, pos)
	ns := &viewState[T]{root: s.root, count: s.count, position: pos, idx: idx,
		hashSum: s.hashSum, rows: s.rows, bytes: s.bytes, bad: s.bad}
	if v.wantChanges() {
		ns.root.each(func(k string, it *item[T]) bool {
			if o, ok := old.root.get(k, hashKey(k)); !ok {
				v.w.change(v, Change[T]{Key: k, Op: OpCreate, New: it.obj, Position: pos})
			} else if o.rowhash != it.rowhash {
				v.w.change(v, Change[T]{Key: k, Op: OpUpdate, Old: o.obj, New: it.obj, Position: pos})
			}
			return true
		})
		old.root.each(func(k string, it *item[T]) bool {
			if _, ok := ns.root.get(k, hashKey(k)); !ok {
				v.w.change(v, Change[T]{Key: k, Op: OpDelete, Old: it.obj, Position: pos})
			}
			return true
		})
	}
	// The new version's nodes carry no edit token: live rows staged on it copy their paths.
	v.w.cur, v.w.e, v.w.badOwned = ns, new(edit), true
}

// abortReplace drops a replacement in progress (the stream broke before SnapshotEnd).
// Nothing runs in the background while rows are staged, so there is nothing to wait for.
func (v *View[T]) abortReplace() { v.w.staging = nil }

// buildIndexesSafe builds the secondary indexes of the staged state s (buildIndexes). The
// rows whose index functions panicked are refused like rows their decoder refused: they
// leave the live rows for the refused ones (still accounted) and the indexes are built
// again without them (a rare path: a second build is paid only after a panic; a third
// only if an index function panics on a row it did not panic on before).
func (v *View[T]) buildIndexesSafe(s *stagingView[T], pos int64) []*tnode[*keySet] {
	for {
		idx, panicked := v.buildIndexes(s.root)
		if len(panicked) == 0 {
			return idx
		}
		e := new(edit)
		for key, err := range panicked {
			h := hashKey(key)
			if it, ok := s.root.get(key, h); ok {
				s.bad[key] = *it
				s.root, _, _ = s.root.del(e, key, h, 0)
				s.count--
				v.decodeFailed(key, pos, err)
			}
		}
	}
}

// buildIndexes builds every secondary index of a whole new version in one pass per index:
// (value, key) pairs sorted in trie order, each value's key set and the value trie built
// bottom-up (see buildTrie). It also returns the keys whose index function panicked (with
// the *PanicError); the indexes are then incomplete.
func (v *View[T]) buildIndexes(root *tnode[item[T]]) (_ []*tnode[*keySet], panicked map[string]error) {
	out := make([]*tnode[*keySet], len(v.indexFns))
	type pair struct {
		vo, ko   uint64
		val, key string
	}
	for i, fn := range v.indexFns {
		var ps []pair
		call := func(k string, obj T) (vals []string, ok bool) {
			defer func() {
				if p := recover(); p != nil {
					if panicked == nil {
						panicked = map[string]error{}
					}
					panicked[k] = v.c.recovered(p, "index function "+v.indexName(i), v.name, k)
				}
			}()
			return fn(obj), true
		}
		root.each(func(k string, it *item[T]) bool {
			vals, ok := call(k, it.obj)
			if !ok {
				return true
			}
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
	return out, panicked
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
