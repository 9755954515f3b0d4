package player

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// rowStore holds the live rows of one view of the materialized copy without a pointer
// per row, so that a garbage collection does not trace them: a collection marks what
// holds pointers, and a copy of millions of rows as items and maps of strings took the
// collector hundreds of milliseconds of marking and assists, stalling dispatch to every
// target. Here a view is
//
//   - an arena: byte chunks (no pointers inside) to which each row is appended as one
//     record — a header (index, key hash, lengths, kind, flags), the key, and the row's
//     one-entry frame as entryItem made it — in increasing index order, since the main
//     fetcher applies the log in order. The arena is therefore also the index order a
//     snapshot walks, without a sort;
//   - byHash: key hash -> location of the key's live record (a map of two integers, which
//     the collector does not trace), and overflow: key -> location for the rare key whose
//     hash another live key holds in byHash;
//   - slots: (index, key hash, location, size) of the records in index order, 32 bytes, so
//     that a snapshot walks one dense array instead of the records scattered over the
//     arena (a walk of the arena touched a cache line per row: 15 times slower), and a
//     shard keeps its rows by their hash without reading them. A slot is found by binary
//     search on its index; it is compacted in place, order kept, when more than half are
//     dead.
//
// An update or tombstone of a key clears the live flag of its previous record and marks
// its slot dead. When the
// dead bytes pass half the live ones, the live records are moved, in order, to a new arena, a
// few kilobytes per applied record (migrate), so that no single apply pays for the whole
// view: during the move appends still go to the old arena's tail, which the move chases;
// when it reaches it the new arena takes over and the old one is dropped. The arena thus
// holds about 1.5 times the live bytes at most (each dead byte costs two bytes moved).
//
// A record's key and frame bytes are never written again once appended (only its flags
// byte, outside them), so items made from a record (itemAt) share its bytes, and a
// snapshot keeps the chunks it points into alive after the store has dropped them. Not
// safe for concurrent use: guarded by stream.mu.
type rowStore struct {
	view     string
	byHash   map[uint64]uint64 // key hash -> location (locOf)
	overflow map[string]uint64 // key -> location, for keys whose hash is taken in byHash
	cur      arena             // where rows are appended
	next     *arena            // while moving: the live records before the cursor, moved
	gen      uint64            // the generation bit of cur's locations (next has the other)
	cursor   arenaPos          // while moving: the next record of cur to move
	live     int               // live rows
	liveB    int               // bytes of live records
	deadB    int               // bytes of dead records not dropped yet
	last     int64             // the index of the last row put (-1: none)
	slots    []rowSlot         // index order
	deadS    int               // dead slots
}

// rowSlot is a record's place in the index order; loc is deadLoc once it is replaced.
type rowSlot struct {
	index int64
	hash  uint64
	loc   uint64
	size  uint32 // the row's frame, the bytes it counts for as an item (item.size)
}

const deadLoc = math.MaxUint64

// arena is a list of chunks; records never straddle two.
type arena struct {
	chunks [][]byte
}

// arenaPos is a record's position in an arena.
type arenaPos struct{ chunk, off int }

// The record header: index (8), key hash (8), key length (4), frame length (4), the
// offset of the Entry in the frame (1), kind (1), txn (1), live (1). The live byte is the
// only one written after the append: it is read under stream.mu alone, while items made
// from the record read the others from any goroutine.
const (
	recHeader  = 28
	recLiveAt  = 27
	chunkFirst = 4 << 10 // a view's first chunk; chunks double up to chunkMax
	chunkMax   = 1 << 20
	// moveBudget is the bytes of records migrate moves per applied record at least: the
	// move must outrun the appends it chases, and a record is at most a few kilobytes in
	// the common case (a larger one raises the step, see add).
	moveBudget = 16 << 10
)

// rowHash is the key hash of a record (record.KeyHash: the shards' hash too); tests make
// it collide.
var rowHash = record.KeyHash

func newRowStore(view string) *rowStore {
	return &rowStore{view: view, byHash: map[uint64]uint64{}, last: -1}
}

// locOf packs a generation bit, a chunk number and an offset into a location.
func locOf(gen uint64, p arenaPos) uint64 { return gen<<63 | uint64(p.chunk)<<32 | uint64(p.off) }

// record returns the bytes of the record at loc, from its header to its frame's end.
func (r *rowStore) record(loc uint64) []byte {
	a := &r.cur
	if loc>>63 != r.gen {
		a = r.next
	}
	return a.at(loc)
}

// at returns the record at loc of an arena.
func (a *arena) at(loc uint64) []byte {
	return recordAt(a.chunks[loc>>32&(1<<31-1)], int(uint32(loc)))
}

// recordAt returns the record starting at off of chunk c.
func recordAt(c []byte, off int) []byte {
	h := c[off:]
	n := recHeader + int(binary.LittleEndian.Uint32(h[16:])) + int(binary.LittleEndian.Uint32(h[20:]))
	return h[:n:n]
}

func recIndex(rec []byte) int64 { return int64(binary.LittleEndian.Uint64(rec)) }
func recHash(rec []byte) uint64 { return binary.LittleEndian.Uint64(rec[8:]) }
func recLive(rec []byte) bool   { return rec[recLiveAt] != 0 }
func recKey(rec []byte) []byte {
	return rec[recHeader : recHeader+binary.LittleEndian.Uint32(rec[16:])]
}
func recFrame(rec []byte) []byte { return rec[recHeader+binary.LittleEndian.Uint32(rec[16:]):] }

// lookup returns the location of key's live row.
func (r *rowStore) lookup(key string) (uint64, bool) {
	if loc, ok := r.byHash[rowHash(key)]; ok && string(recKey(r.record(loc))) == key {
		return loc, true
	}
	loc, ok := r.overflow[key]
	return loc, ok
}

// get returns key's live row as an item, nil when there is none.
func (r *rowStore) get(key string) *item {
	if loc, ok := r.lookup(key); ok {
		return r.itemAt(loc)
	}
	return nil
}

// put makes it (a row, not a tombstone, of this view, whose index is above every index
// put before) the key's live row. It reports whether the key had none.
func (r *rowStore) put(it *item) bool {
	if it.index <= r.last {
		panic("player: rowStore.put out of index order") // the main fetcher reads the log in order
	}
	r.last = it.index
	h := rowHash(it.key)
	old, had := r.lookup(it.key)
	if had {
		r.kill(old)
	}
	loc := r.append(&r.cur, r.gen, it, h)
	r.live++
	switch {
	case had && r.holds(h, old), !had && !r.hashTaken(h):
		r.byHash[h] = loc
	default:
		if r.overflow == nil {
			r.overflow = map[string]uint64{}
		}
		r.overflow[it.key] = loc
	}
	r.step(len(it.single))
	return !had
}

// hashTaken reports whether byHash holds a live row of another key under h.
func (r *rowStore) hashTaken(h uint64) bool {
	_, ok := r.byHash[h]
	return ok
}

// holds reports whether byHash maps h to loc (0 is a location too).
func (r *rowStore) holds(h, loc uint64) bool {
	l, ok := r.byHash[h]
	return ok && l == loc
}

// remove drops key's live row (a tombstone). It reports whether there was one.
func (r *rowStore) remove(key string) bool {
	loc, ok := r.lookup(key)
	if !ok {
		return false
	}
	r.kill(loc)
	if h := rowHash(key); r.holds(h, loc) {
		delete(r.byHash, h)
	} else {
		delete(r.overflow, key)
	}
	r.step(0)
	return true
}

// kill clears the live flag of the record at loc and marks its slot dead.
func (r *rowStore) kill(loc uint64) {
	rec := r.record(loc)
	rec[recLiveAt] = 0
	r.live--
	r.liveB -= len(rec)
	r.deadB += len(rec)
	i := r.slotOf(recIndex(rec), loc)
	r.slots[i].loc = deadLoc
	if r.deadS++; r.deadS*2 > len(r.slots) {
		r.compactSlots()
	}
}

// slotOf returns the position of the slot of the record at index, whose location is loc.
func (r *rowStore) slotOf(index int64, loc uint64) int {
	i := r.search(index)
	if i == len(r.slots) || r.slots[i].index != index || r.slots[i].loc != loc {
		panic("player: rowStore: a record without its slot") // the slots and the arena disagree: a bug
	}
	return i
}

// search returns the position of the first slot whose index is >= index.
func (r *rowStore) search(index int64) int {
	i, _ := slices.BinarySearchFunc(r.slots, index, func(s rowSlot, x int64) int { return cmp.Compare(s.index, x) })
	return i
}

// compactSlots drops the dead slots in place, order kept, and releases the slice's memory
// when it shrank to much less than its capacity.
func (r *rowStore) compactSlots() {
	r.slots = slices.DeleteFunc(r.slots, func(s rowSlot) bool { return s.loc == deadLoc })
	r.deadS = 0
	if c := cap(r.slots); c > 1024 && len(r.slots) < c/4 {
		r.slots = slices.Clip(slices.Clone(r.slots))
	}
}

// append writes it as a live record at a's tail and returns its location.
func (r *rowStore) append(a *arena, gen uint64, it *item, h uint64) uint64 {
	n := recHeader + len(it.key) + len(it.single)
	c := a.room(n)
	off := len(c)
	c = binary.LittleEndian.AppendUint64(c, uint64(it.index))
	c = binary.LittleEndian.AppendUint64(c, h)
	c = binary.LittleEndian.AppendUint32(c, uint32(len(it.key)))
	c = binary.LittleEndian.AppendUint32(c, uint32(len(it.single)))
	txn := byte(0)
	if it.txn {
		txn = 1
	}
	c = append(c, byte(len(it.single)-len(it.wire)), byte(it.kind), txn, 1)
	c = append(c, it.key...)
	c = append(c, it.single...)
	a.chunks[len(a.chunks)-1] = c
	r.liveB += n
	loc := locOf(gen, arenaPos{len(a.chunks) - 1, off})
	r.slots = append(r.slots, rowSlot{index: it.index, hash: h, loc: loc, size: uint32(len(it.single))})
	return loc
}

// room returns the last chunk, with at least n bytes free after its length (a new chunk
// when it has not).
func (a *arena) room(n int) []byte {
	if k := len(a.chunks); k > 0 {
		if c := a.chunks[k-1]; cap(c)-len(c) >= n {
			return c
		}
	}
	size := chunkFirst
	if k := len(a.chunks); k > 0 {
		size = min(2*cap(a.chunks[k-1]), chunkMax)
	}
	a.chunks = append(a.chunks, make([]byte, 0, max(size, n)))
	return a.chunks[len(a.chunks)-1]
}

// step starts a move when the dead bytes pass half the live ones, and moves a part of one
// under way: at least moveBudget bytes, and twice what was just appended.
func (r *rowStore) step(appended int) {
	if r.next == nil {
		if r.deadB < max(r.liveB/2, chunkFirst) {
			return
		}
		r.next, r.cursor = &arena{}, arenaPos{}
	}
	r.migrate(max(moveBudget, 2*(recHeader+appended)))
}

// migrate moves up to budget bytes of records from the cursor: live ones to next's tail
// (their locations updated), dead ones dropped; a chunk the cursor leaves is released.
// At cur's tail the move is done: next becomes cur.
func (r *rowStore) migrate(budget int) {
	ngen := r.gen ^ 1
	for budget > 0 {
		cs := r.cur.chunks
		if r.cursor.chunk < len(cs) && r.cursor.off == len(cs[r.cursor.chunk]) {
			if r.cursor.chunk == len(cs)-1 {
				break // the tail: done
			}
			cs[r.cursor.chunk] = nil
			r.cursor = arenaPos{r.cursor.chunk + 1, 0}
			continue
		}
		if r.cursor.chunk >= len(cs) {
			break // an empty arena
		}
		rec := recordAt(cs[r.cursor.chunk], r.cursor.off)
		old := locOf(r.gen, r.cursor)
		r.cursor.off += len(rec)
		budget -= len(rec)
		if !recLive(rec) {
			r.deadB -= len(rec)
			continue
		}
		loc := r.moveRecord(rec, ngen)
		r.slots[r.slotOf(recIndex(rec), old)].loc = loc
		if h := recHash(rec); r.holds(h, old) {
			r.byHash[h] = loc
		} else {
			r.overflow[string(recKey(rec))] = loc
		}
	}
	cs := r.cur.chunks
	if len(cs) == 0 || (r.cursor.chunk == len(cs)-1 && r.cursor.off == len(cs[r.cursor.chunk])) {
		r.cur, r.next, r.gen, r.cursor = *r.next, nil, ngen, arenaPos{}
	}
}

// moveRecord copies a live record to next's tail and returns its new location.
func (r *rowStore) moveRecord(rec []byte, gen uint64) uint64 {
	a := r.next
	c := a.room(len(rec))
	off := len(c)
	a.chunks[len(a.chunks)-1] = append(c, rec...)
	return locOf(gen, arenaPos{len(a.chunks) - 1, off})
}

// itemAt returns the row at loc as an item sharing the record's bytes.
func (r *rowStore) itemAt(loc uint64) *item {
	return recordItem(r.record(loc), r.view)
}

// recordItem makes the item of a record of view: its key and frame are the record's own
// bytes, which are never written again.
func recordItem(rec []byte, view string) *item {
	key, frame := recKey(rec), recFrame(rec)
	hdr := int(rec[24])
	it := &item{
		index: recIndex(rec), view: view, kind: statecastv1.Kind(rec[25]),
		txn: rec[26] != 0, wire: frame[hdr:], single: frame,
	}
	if len(key) > 0 {
		it.key = unsafe.String(&key[0], len(key))
	}
	return it
}

// walk calls f with the slot of each live record whose index is >= from, in increasing
// index order, until f returns false.
func (r *rowStore) walk(from int64, f func(s rowSlot) bool) {
	for _, sl := range r.slots[r.search(from):] {
		if sl.loc != deadLoc && !f(sl) {
			return
		}
	}
}

// chunksOf returns a copy of the chunk lists of the arenas, by generation bit, for a
// snapshot: the store releases chunks (sets them nil) in its own lists as it moves.
func (r *rowStore) chunksOf() (byGen [2][][]byte) {
	byGen[r.gen] = slices.Clone(r.cur.chunks)
	if r.next != nil {
		byGen[r.gen^1] = slices.Clone(r.next.chunks)
	}
	return byGen
}

// first returns one live row of the view, nil when it has none.
func (r *rowStore) first() *item {
	var it *item
	r.walk(0, func(s rowSlot) bool { it = r.itemAt(s.loc); return false })
	return it
}
