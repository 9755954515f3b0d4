package player

import (
	"cmp"
	"math"
	"slices"
)

// snapRows is a snapshot's content: the rows of a target's views (and the latest position
// record) at the main position, as references into the views' arenas taken under
// stream.mu in increasing index order, made items one at a time as the snapshot source
// pushes them. The references are integers and the chunks they point into are kept by
// the snapshot (a move of the store drops its own references, not these): a snapshot of
// millions of rows costs 24 bytes a row until it is pushed, and the lock is held for a
// walk, not for millions of allocations.
type snapRows struct {
	stores []snapStore // the stores refs point into
	refs   []snapRef
	pos    *item // the position record, where refs holds a ref of store posStore
	bytes  int64 // the items' sizes (item.size), the snapshot's reservation
}

// snapStore is a store's view and its arenas' chunks (by generation bit) at the snapshot.
type snapStore struct {
	view   string
	arenas [2]arena
}

// snapRef is one row of a snapshot: its index, its store and the record's location.
type snapRef struct {
	index int64
	loc   uint64
	store uint32
}

const posStore = math.MaxUint32 // the store of the position record's snapRef

// len returns the number of items.
func (s *snapRows) len() int { return len(s.refs) }

// item returns the i-th item.
func (s *snapRows) item(i int) *item {
	r := s.refs[i]
	if r.store == posStore {
		return s.pos
	}
	st := &s.stores[r.store]
	return recordItem(st.arenas[r.loc>>63].at(r.loc), st.view)
}

// items returns every item (tests).
func (s *snapRows) items() []*item {
	out := make([]*item, s.len())
	for i := range out {
		out[i] = s.item(i)
	}
	return out
}

// drop releases the first n references and, once every row is pushed, the chunks.
func (s *snapRows) drop(n int) {
	s.refs = s.refs[n:]
	if len(s.refs) == 0 {
		s.stores, s.refs, s.pos = nil, nil, nil
	}
}

// collectRows returns the live rows of stores whose index is >= from and whose key hash
// keeps[i] keeps (keeps nil, or keeps[i] nil: every row of stores[i]), in increasing index
// order: each store's walk (already in index order), merged by index.
func collectRows(stores []*rowStore, keeps []func(hash uint64) bool, from int64) *snapRows {
	s := &snapRows{}
	lists := make([][]snapRef, 0, len(stores))
	for i, st := range stores {
		var keep func(uint64) bool
		if keeps != nil {
			keep = keeps[i]
		}
		var list []snapRef
		if keep == nil {
			list = make([]snapRef, 0, st.live)
		}
		byGen := st.chunksOf()
		s.stores = append(s.stores, snapStore{view: st.view, arenas: [2]arena{{byGen[0]}, {byGen[1]}}})
		si := uint32(len(s.stores) - 1)
		st.walk(from, func(sl rowSlot) bool {
			if keep == nil || keep(sl.hash) {
				list = append(list, snapRef{index: sl.index, loc: sl.loc, store: si})
				s.bytes += int64(sl.size) + itemOverhead
			}
			return true
		})
		if len(list) > 0 {
			lists = append(lists, list)
		}
	}
	s.refs = mergeRefs(lists)
	return s
}

// withPosition inserts the position record p at its place when its index is >= from.
func (s *snapRows) withPosition(p *item, from int64) {
	if p == nil || p.index < from {
		return
	}
	i, _ := slices.BinarySearchFunc(s.refs, p.index, func(r snapRef, x int64) int { return cmp.Compare(r.index, x) })
	s.refs = slices.Insert(s.refs, i, snapRef{index: p.index, store: posStore})
	s.pos = p
	s.bytes += int64(p.size())
}

// mergeRefs merges lists sorted by index into one (k, the number of views, is small:
// the list whose head is smallest gives its run below every other head).
func mergeRefs(lists [][]snapRef) []snapRef {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]snapRef, 0, n)
	for len(lists) > 0 {
		m := 0
		for j := 1; j < len(lists); j++ {
			if lists[j][0].index < lists[m][0].index {
				m = j
			}
		}
		limit := int64(math.MaxInt64)
		for j := range lists {
			if j != m && lists[j][0].index < limit {
				limit = lists[j][0].index
			}
		}
		l := lists[m]
		k := 0
		for k < len(l) && l[k].index < limit {
			k++
		}
		out = append(out, l[:k]...)
		if lists[m] = l[k:]; len(lists[m]) == 0 {
			lists = slices.Delete(lists, m, m+1)
		}
	}
	return out
}
