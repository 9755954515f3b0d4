package cacheclient

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTrieModel applies random puts and deletes in random-sized transactions and compares
// the trie with a map after each one; published versions must never change afterwards.
func TestTrieModel(t *testing.T) {
	for _, keys := range []int{1, 10, 1000, 20000} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(keys)))
			model := map[string]int{}
			var root *tnode[int]
			type version struct {
				root  *tnode[int]
				model map[string]int
			}
			var old []version
			for txn := 0; txn < 60; txn++ {
				e := new(edit)
				n := rng.IntN(keys) + 1
				for range n {
					k := fmt.Sprintf("k%d", rng.IntN(keys))
					if rng.IntN(3) == 0 {
						var had bool
						var prev int
						root, prev, had = root.del(e, k, hashKey(k), 0)
						mv, mok := model[k]
						if had != mok || (had && prev != mv) {
							t.Fatalf("del %s: got %d,%v want %d,%v", k, prev, had, mv, mok)
						}
						delete(model, k)
					} else {
						v := rng.Int()
						var had bool
						var prev int
						root, prev, had = root.put(e, k, hashKey(k), 0, v)
						mv, mok := model[k]
						if had != mok || (had && prev != mv) {
							t.Fatalf("put %s: got %d,%v want %d,%v", k, prev, had, mv, mok)
						}
						model[k] = v
					}
				}
				checkTrie(t, root, model)
				cp := make(map[string]int, len(model))
				for k, v := range model {
					cp[k] = v
				}
				old = append(old, version{root, cp})
			}
			for _, o := range old {
				checkTrie(t, o.root, o.model)
			}
		})
	}
}

func checkTrie(t *testing.T, root *tnode[int], model map[string]int) {
	t.Helper()
	n := 0
	root.each(func(k string, v *int) bool {
		n++
		if mv, ok := model[k]; !ok || mv != *v {
			t.Fatalf("trie has %s=%d, model %d,%v", k, *v, mv, ok)
		}
		return true
	})
	if n != len(model) {
		t.Fatalf("trie has %d keys, model %d", n, len(model))
	}
	for k, mv := range model {
		if v, ok := root.get(k, hashKey(k)); !ok || *v != mv {
			t.Fatalf("get %s: %v", k, ok)
		}
	}
	if _, ok := root.get("absent", hashKey("absent")); ok {
		t.Fatal("absent key found")
	}
	if len(model) == 0 && root != nil {
		t.Fatal("empty trie is not nil")
	}
}

// TestTrieCollisions forces full 64-bit hash collisions to exercise collision nodes.
func TestTrieCollisions(t *testing.T) {
	const h = 0xdeadbeefcafef00d
	rehash = func(string) uint64 { return h }
	defer func() { rehash = hashKey }()
	var root *tnode[int]
	e := new(edit)
	for i := range 5 {
		root, _, _ = root.put(e, fmt.Sprint(i), h, 0, i)
	}
	for i := range 5 {
		if v, ok := root.get(fmt.Sprint(i), h); !ok || *v != i {
			t.Fatalf("get %d: %v %v", i, v, ok)
		}
	}
	e2 := new(edit)
	for i := range 5 {
		var ok bool
		root, _, ok = root.del(e2, fmt.Sprint(i), h, 0)
		if !ok {
			t.Fatalf("del %d", i)
		}
	}
	if root != nil {
		t.Fatal("not empty")
	}
}

// TestBuildTrieIsCanonical: the bulk build gives the same shape as inserting one by one
// (and every key is found), including forced full-hash collisions.
func TestBuildTrieIsCanonical(t *testing.T) {
	for _, n := range []int{1, 2, 33, 5000, 100000} {
		var root *tnode[int]
		e := new(edit)
		type kv struct {
			o uint64
			l leaf[int]
		}
		var kvs []kv
		for i := range n {
			k := fmt.Sprintf("key-%d", i)
			root, _, _ = root.put(e, k, hashKey(k), 0, i)
			kvs = append(kvs, kv{trieOrder(hashKey(k)), leaf[int]{k, i}})
		}
		slices.SortFunc(kvs, func(a, b kv) int { return cmpU64(a.o, b.o) })
		var ls []leaf[int]
		var os []uint64
		for _, x := range kvs {
			ls = append(ls, x.l)
			os = append(os, x.o)
		}
		ps := make([]pos, len(kvs))
		for i, x := range kvs {
			ps[i] = pos{sk: x.o, i: int32(i)}
		}
		for name, built := range map[string]*tnode[int]{
			"buildTrie":    buildTrie(ls, os, 0),
			"buildTriePos": buildTriePos(ps, func(i int32) *leaf[int] { return &ls[i] }, 0),
			"buildTriePar": buildTriePar(ps, func(i int32) *leaf[int] { return &ls[i] }, 3),
		} {
			a1, b1, c1 := root.stats()
			a2, b2, c2 := built.stats()
			if a1 != a2 || b1 != b2 || c1 != c2 {
				t.Fatalf("n=%d: put gives %d nodes %d leaves %d children, %s %d %d %d", n, a1, b1, c1, name, a2, b2, c2)
			}
			for _, x := range kvs {
				if v, ok := built.get(x.l.key, hashKey(x.l.key)); !ok || *v != x.l.val {
					t.Fatalf("n=%d: %s: %s not found", n, name, x.l.key)
				}
			}
		}
	}
}

func TestRadixSort(t *testing.T) {
	for _, n := range []int{0, 1, 5, 255, 256, 10000} {
		rng := rand.New(rand.NewPCG(3, uint64(n)))
		a := make([]pos, n)
		for i := range a {
			a[i] = pos{sk: rng.Uint64() >> uint(rng.IntN(64)), i: int32(i)}
			if i%7 == 3 && i > 0 {
				a[i].sk = a[i-1].sk // duplicates keep arrival order
			}
		}
		want := slices.Clone(a)
		slices.SortStableFunc(want, func(x, y pos) int {
			if x.sk == y.sk {
				return 0
			}
			return cmpU64(x.sk, y.sk)
		})
		if got := radixSort(a); !slices.Equal(got, want) {
			t.Fatalf("n=%d: radix sort differs", n)
		}
	}
}
