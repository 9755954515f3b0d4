package cacheclient

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// trie is a persistent (immutable once published) hash array mapped trie keyed by string,
// in the CHAMP layout: each node has a bitmap of inline leaves and a bitmap of child nodes,
// 32 slots per level indexed by 5 bits of a 64-bit maphash of the key.
//
// Readers walk a published root without any synchronisation: published nodes are never
// modified. A writer changes the trie inside a transaction identified by an *edit token:
// nodes created by that transaction carry the token and are mutated in place (so a batch
// of n changes copies each path at most once, and a bulk load builds the trie without
// garbage); nodes from earlier transactions are copied first (path copying). After the
// transaction the new root is published with one atomic store, and the token is never
// used again, so everything reachable from a published root is immutable.

var trieSeed = maphash.MakeSeed()

func hashKey(k string) uint64 { return maphash.String(trieSeed, k) }

// rehash recomputes a stored key's hash when a leaf is pushed down (a variable for tests).
var rehash = hashKey

const (
	trieBits  = 5
	trieMask  = 1<<trieBits - 1
	trieDepth = 64 // shift at which hash bits are exhausted: collision nodes hold leaves only
)

type edit struct{ _ byte } // non-zero size so that each new(edit) is a distinct pointer

type leaf[V any] struct {
	key string
	val V
}

type tnode[V any] struct {
	datamap uint32 // slots holding an inline leaf
	nodemap uint32 // slots holding a child node
	edit    *edit
	leaves  []leaf[V]
	nodes   []*tnode[V]
}

func slotOf(h uint64, shift uint) uint32 { return 1 << ((h >> shift) & trieMask) }

func posOf(bitmap, bit uint32) int { return bits.OnesCount32(bitmap & (bit - 1)) }

// get returns the value stored under key.
func (n *tnode[V]) get(key string, h uint64) (*V, bool) {
	for shift := uint(0); n != nil; shift += trieBits {
		if shift >= trieDepth {
			for i := range n.leaves {
				if n.leaves[i].key == key {
					return &n.leaves[i].val, true
				}
			}
			return nil, false
		}
		bit := slotOf(h, shift)
		if n.datamap&bit != 0 {
			l := &n.leaves[posOf(n.datamap, bit)]
			if l.key == key {
				return &l.val, true
			}
			return nil, false
		}
		if n.nodemap&bit == 0 {
			return nil, false
		}
		n = n.nodes[posOf(n.nodemap, bit)]
	}
	return nil, false
}

// owned returns n itself when it belongs to transaction e, or a copy that does.
func (n *tnode[V]) owned(e *edit) *tnode[V] {
	if n.edit == e {
		return n
	}
	c := &tnode[V]{datamap: n.datamap, nodemap: n.nodemap, edit: e}
	if len(n.leaves) > 0 {
		c.leaves = append(make([]leaf[V], 0, len(n.leaves)), n.leaves...)
	}
	if len(n.nodes) > 0 {
		c.nodes = append(make([]*tnode[V], 0, len(n.nodes)), n.nodes...)
	}
	return c
}

func insertAt[T any](s []T, i int, v T) []T {
	out := make([]T, len(s)+1) // exact size: no slack capacity kept in long-lived nodes
	copy(out, s[:i])
	out[i] = v
	copy(out[i+1:], s[i:])
	return out
}

func removeAt[T any](s []T, i int) []T {
	if len(s) == 1 {
		return nil
	}
	out := make([]T, len(s)-1)
	copy(out, s[:i])
	copy(out[i:], s[i+1:])
	return out
}

// put stores val under key. It returns the (possibly new) node, the previous value and
// whether there was one.
func (n *tnode[V]) put(e *edit, key string, h uint64, shift uint, val V) (*tnode[V], V, bool) {
	var zero V
	if n == nil {
		n = &tnode[V]{edit: e}
	}
	if shift >= trieDepth {
		for i := range n.leaves {
			if n.leaves[i].key == key {
				m := n.owned(e)
				old := m.leaves[i].val
				m.leaves[i].val = val
				return m, old, true
			}
		}
		m := n.owned(e)
		m.leaves = insertAt(m.leaves, len(m.leaves), leaf[V]{key, val})
		return m, zero, false
	}
	bit := slotOf(h, shift)
	switch {
	case n.datamap&bit != 0:
		i := posOf(n.datamap, bit)
		if n.leaves[i].key == key {
			m := n.owned(e)
			old := m.leaves[i].val
			m.leaves[i].val = val
			return m, old, true
		}
		// Two keys share this slot: push both one level down.
		other := n.leaves[i]
		child := (*tnode[V])(nil)
		child, _, _ = child.put(e, other.key, rehash(other.key), shift+trieBits, other.val)
		child, _, _ = child.put(e, key, h, shift+trieBits, val)
		m := n.owned(e)
		m.leaves = removeAt(m.leaves, i)
		m.datamap &^= bit
		m.nodes = insertAt(m.nodes, posOf(m.nodemap, bit), child)
		m.nodemap |= bit
		return m, zero, false
	case n.nodemap&bit != 0:
		i := posOf(n.nodemap, bit)
		child, old, ok := n.nodes[i].put(e, key, h, shift+trieBits, val)
		m := n
		if child != n.nodes[i] {
			m = n.owned(e)
			m.nodes[i] = child
		}
		return m, old, ok
	default:
		m := n.owned(e)
		m.leaves = insertAt(m.leaves, posOf(m.datamap, bit), leaf[V]{key, val})
		m.datamap |= bit
		return m, zero, false
	}
}

// del removes key. It returns the (possibly new, possibly nil when empty) node, the removed
// value and whether the key was present. Nodes are kept canonical: a child left with a single
// leaf and no children is inlined into its parent.
func (n *tnode[V]) del(e *edit, key string, h uint64, shift uint) (*tnode[V], V, bool) {
	var zero V
	if n == nil {
		return nil, zero, false
	}
	if shift >= trieDepth {
		for i := range n.leaves {
			if n.leaves[i].key == key {
				old := n.leaves[i].val
				if len(n.leaves) == 1 {
					return nil, old, true
				}
				m := n.owned(e)
				m.leaves = removeAt(m.leaves, i)
				return m, old, true
			}
		}
		return n, zero, false
	}
	bit := slotOf(h, shift)
	switch {
	case n.datamap&bit != 0:
		i := posOf(n.datamap, bit)
		if n.leaves[i].key != key {
			return n, zero, false
		}
		old := n.leaves[i].val
		if n.nodemap == 0 && len(n.leaves) == 1 {
			return nil, old, true
		}
		m := n.owned(e)
		m.leaves = removeAt(m.leaves, i)
		m.datamap &^= bit
		return m, old, true
	case n.nodemap&bit != 0:
		i := posOf(n.nodemap, bit)
		child, old, ok := n.nodes[i].del(e, key, h, shift+trieBits)
		if !ok {
			return n, zero, false
		}
		m := n.owned(e)
		switch {
		case child == nil:
			m.nodes = removeAt(m.nodes, i)
			m.nodemap &^= bit
			if m.nodemap == 0 && len(m.leaves) == 0 {
				return nil, old, true
			}
		case child.nodemap == 0 && len(child.leaves) == 1 && shift+trieBits < trieDepth:
			// Inline the lone leaf into this node.
			m.nodes = removeAt(m.nodes, i)
			m.nodemap &^= bit
			m.leaves = insertAt(m.leaves, posOf(m.datamap, bit), child.leaves[0])
			m.datamap |= bit
		default:
			m.nodes[i] = child
		}
		// A node with a single leaf and nothing else is inlined by its parent.
		return m, old, true
	}
	return n, zero, false
}

// each calls fn for every leaf until fn returns false.
func (n *tnode[V]) each(fn func(key string, v *V) bool) bool {
	if n == nil {
		return true
	}
	for i := range n.leaves {
		if !fn(n.leaves[i].key, &n.leaves[i].val) {
			return false
		}
	}
	for _, c := range n.nodes {
		if !c.each(fn) {
			return false
		}
	}
	return true
}

// stats counts nodes, leaf slots and child slots (for memory estimates and tests).
func (n *tnode[V]) stats() (nodes, leaves, children int) {
	if n == nil {
		return 0, 0, 0
	}
	nodes, leaves, children = 1, len(n.leaves), len(n.nodes)
	for _, c := range n.nodes {
		a, b, d := c.stats()
		nodes, leaves, children = nodes+a, leaves+b, children+d
	}
	return
}

// trieOrder maps a hash to a number whose order is the trie's order: the 5-bit chunk used
// at depth 0 becomes the most significant, and so on (the last chunk has 4 bits). Sorting
// keys by it groups them exactly as the trie's levels do.
func trieOrder(h uint64) uint64 {
	var o uint64
	for shift := uint(0); shift < 60; shift += trieBits {
		o = o<<trieBits | (h>>shift)&trieMask
	}
	return o<<4 | h>>60
}

// chunkAt returns the slot number at shift of a key whose trieOrder is o.
func chunkAt(o uint64, shift uint) uint64 {
	if shift >= 60 {
		return o & 15
	}
	return (o >> (59 - shift)) & trieMask
}

// buildTrie builds the canonical trie of leaves sorted by trieOrder (os holds their
// orders): buildTriePos over their positions.
func buildTrie[V any](leaves []leaf[V], os []uint64, shift uint) *tnode[V] {
	ps := make([]pos, len(os))
	for i, o := range os {
		ps[i] = pos{sk: o, i: int32(i)}
	}
	return buildTriePos(ps, func(i int32) *leaf[V] { return &leaves[i] }, shift)
}

// buildTriePos builds the canonical trie of rows ps sorted by trie order (sk), leafAt(p.i)
// being a row's leaf: a slot with one key holds it inline, a slot with more holds a child
// node. It builds straight from the staged rows, without first copying their leaves into
// a slice of their own. The nodes carry no edit token of a live transaction, so they are
// immutable once published.
func buildTriePos[V any](ps []pos, leafAt func(i int32) *leaf[V], shift uint) *tnode[V] {
	n := &tnode[V]{}
	if shift >= trieDepth {
		n.leaves = make([]leaf[V], len(ps))
		for i, p := range ps {
			n.leaves[i] = *leafAt(p.i)
		}
		return n
	}
	nl, nn := 0, 0
	for i := 0; i < len(ps); {
		c := chunkAt(ps[i].sk, shift)
		j := i + 1
		for j < len(ps) && chunkAt(ps[j].sk, shift) == c {
			j++
		}
		if j-i == 1 {
			nl++
		} else {
			nn++
		}
		i = j
	}
	if nl > 0 {
		n.leaves = make([]leaf[V], 0, nl)
	}
	if nn > 0 {
		n.nodes = make([]*tnode[V], 0, nn)
	}
	for i := 0; i < len(ps); {
		c := chunkAt(ps[i].sk, shift)
		j := i + 1
		for j < len(ps) && chunkAt(ps[j].sk, shift) == c {
			j++
		}
		bit := uint32(1) << c
		if j-i == 1 {
			n.leaves = append(n.leaves, *leafAt(ps[i].i))
			n.datamap |= bit
		} else {
			n.nodes = append(n.nodes, buildTriePos(ps[i:j], leafAt, shift+trieBits))
			n.nodemap |= bit
		}
		i = j
	}
	return n
}

// buildTriePar is buildTriePos with the root's subtrees built on up to workers goroutines
// (each subtree reads only its own rows and writes only its own nodes).
func buildTriePar[V any](ps []pos, leafAt func(i int32) *leaf[V], workers int) *tnode[V] {
	if workers < 2 || len(ps) < 1<<14 {
		return buildTriePos(ps, leafAt, 0)
	}
	n := &tnode[V]{}
	type run struct{ i, j int }
	var leaves, nodes []run
	for i := 0; i < len(ps); {
		c := chunkAt(ps[i].sk, 0)
		j := i + 1
		for j < len(ps) && chunkAt(ps[j].sk, 0) == c {
			j++
		}
		if j-i == 1 {
			leaves = append(leaves, run{i, j})
			n.datamap |= 1 << c
		} else {
			nodes = append(nodes, run{i, j})
			n.nodemap |= 1 << c
		}
		i = j
	}
	if len(leaves) > 0 {
		n.leaves = make([]leaf[V], len(leaves))
		for k, r := range leaves {
			n.leaves[k] = *leafAt(ps[r.i].i)
		}
	}
	if len(nodes) > 0 {
		n.nodes = make([]*tnode[V], len(nodes))
		var wg sync.WaitGroup
		next := atomic.Int32{}
		for range min(workers, len(nodes)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := int(next.Add(1) - 1); k < len(nodes); k = int(next.Add(1) - 1) {
					r := nodes[k]
					n.nodes[k] = buildTriePos(ps[r.i:r.j], leafAt, trieBits)
				}
			}()
		}
		wg.Wait()
	}
	return n
}
