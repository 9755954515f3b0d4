package player

import (
	"cmp"
	"math"
	"slices"

	"github.com/statecast/statecast/schemas/record"
)

// orderSlot is one position of a rowOrder: the index of the row it was appended for, the
// row while it is live (nil once an update or tombstone of its key replaced it), and its
// key's hash (record.KeyHash), from which a shard's snapshot keeps its rows without
// reading any (the rows are scattered in memory; the slots are one array).
type orderSlot struct {
	index int64
	it    *item
	hash  uint64
}

// rowOrder keeps the live rows of one view of the materialized copy in index order, so that a
// snapshot is a walk instead of a sort. The main fetcher applies records in increasing
// index order, so appending keeps the slots sorted; an update or tombstone of a key marks
// the slot of its previous row dead (found by binary search on the index), and the slots
// are compacted in place, order kept, when the dead ones are more than half. Cost: 24
// bytes per slot, at most twice the live rows (plus append's spare capacity). Not safe for
// concurrent use: guarded by stream.mu.
type rowOrder struct {
	slots []orderSlot
	dead  int
}

// add appends a live row; its index must be greater than every index added before.
func (o *rowOrder) add(it *item) {
	if n := len(o.slots); n > 0 && o.slots[n-1].index >= it.index {
		panic("player: rowOrder.add out of index order") // the main fetcher reads the log in order
	}
	o.slots = append(o.slots, orderSlot{index: it.index, it: it, hash: record.KeyHash(it.key)})
}

// kill marks the slot of the row with this index dead (the row was replaced or deleted).
func (o *rowOrder) kill(index int64) {
	i := o.search(index)
	if i == len(o.slots) || o.slots[i].index != index || o.slots[i].it == nil {
		panic("player: rowOrder.kill of a row that is not live") // rows and order disagree: a bug
	}
	o.slots[i].it = nil
	o.dead++
	if o.dead*2 > len(o.slots) {
		o.compact()
	}
}

// compact drops the dead slots in place, keeping the order, and clears the tail so the
// dropped rows can be collected.
func (o *rowOrder) compact() {
	n := 0
	for _, s := range o.slots {
		if s.it != nil {
			o.slots[n] = s
			n++
		}
	}
	clear(o.slots[n:])
	o.slots = o.slots[:n]
	o.dead = 0
	// Release memory when the slice shrank to much less than its capacity.
	if c := cap(o.slots); c > 1024 && n < c/4 {
		o.slots = slices.Clip(slices.Clone(o.slots))
	}
}

// live returns the number of live rows.
func (o *rowOrder) live() int { return len(o.slots) - o.dead }

// rows appends to dst the live rows whose index is >= from, and whose key hash keep
// keeps (nil: every row), in increasing index order, and returns it. Only the slots are
// read (no row is dereferenced).
func (o *rowOrder) rows(dst []*item, from int64, keep func(hash uint64) bool) []*item {
	i := o.search(from)
	if keep == nil {
		dst = slices.Grow(dst, len(o.slots)-i)
	}
	for _, s := range o.slots[i:] {
		if s.it != nil && (keep == nil || keep(s.hash)) {
			dst = append(dst, s.it)
		}
	}
	return dst
}

// search returns the position of the first slot whose index is >= index.
func (o *rowOrder) search(index int64) int {
	i, _ := slices.BinarySearchFunc(o.slots, index, func(s orderSlot, x int64) int { return cmp.Compare(s.index, x) })
	return i
}

// mergeRows returns the live rows of several orders (one per view) whose index is >= from
// and whose key hash keeps[i] keeps (keeps nil, or keeps[i] nil: every row of orders[i]),
// in increasing index order: a k-way merge of their slots by index (no row is
// dereferenced, no sort).
func mergeRows(orders []*rowOrder, keeps []func(hash uint64) bool, from int64) []*item {
	keepOf := func(i int) func(uint64) bool {
		if keeps == nil {
			return nil
		}
		return keeps[i]
	}
	switch len(orders) {
	case 0:
		return nil
	case 1:
		return orders[0].rows(nil, from, keepOf(0))
	}
	type head struct {
		slots []orderSlot
		keep  func(uint64) bool
	}
	n := 0
	heads := make([]head, 0, len(orders))
	for i, o := range orders {
		if sl := o.slots[o.search(from):]; len(sl) > 0 {
			heads = append(heads, head{sl, keepOf(i)})
			if keepOf(i) == nil {
				n += len(sl)
			}
		}
	}
	out := make([]*item, 0, n)
	for len(heads) > 0 {
		// The list whose head has the smallest index (k is the number of views: small).
		m := 0
		for j := 1; j < len(heads); j++ {
			if heads[j].slots[0].index < heads[m].slots[0].index {
				m = j
			}
		}
		// Take its run of slots below every other head's index.
		limit := int64(math.MaxInt64)
		for j := range heads {
			if j != m && heads[j].slots[0].index < limit {
				limit = heads[j].slots[0].index
			}
		}
		h, keep := heads[m].slots, heads[m].keep
		k := 0
		for k < len(h) && h[k].index < limit {
			if h[k].it != nil && (keep == nil || keep(h[k].hash)) {
				out = append(out, h[k].it)
			}
			k++
		}
		if heads[m].slots = h[k:]; len(heads[m].slots) == 0 {
			heads = slices.Delete(heads, m, m+1)
		}
	}
	return out
}
