package cacheclient

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/statecast/statecast/schemas/record"
)

// Decoder turns a row of a view into the service's own type. key is the row's key text (its
// record key without the view prefix, each key column escaped, see [Key]); value is the
// row's JSON object (see schemas/README.md). It must be pure and safe for concurrent use:
// live rows are decoded on the connection goroutine, the rows of a snapshot or state file
// on every core at once. It may keep value.
type Decoder[T any] func(key string, value []byte) (T, error)

// IndexFunc returns the values an object is indexed by: zero, one or many.
type IndexFunc[T any] func(obj T) []string

// item is what a view holds per key. raw is a pointer so that clients without StateDir pay
// 8 bytes for it, not a 16-byte string header.
type item[T any] struct {
	obj     T
	rowhash uint64  // record.RowHash of the record, for the epoch check
	raw     *string // the record value, kept only when the client persists (StateDir)
}

type keySet = tnode[struct{}]

// viewState is one published, immutable version of a view: readers load it with one atomic
// load and see one whole publication or none of it.
type viewState[T any] struct {
	root     *tnode[item[T]]
	count    int
	position int64             // the stream position this version reflects (-1 before any)
	idx      []*tnode[*keySet] // per secondary index: value -> set of keys

	// Accounting over every live row of the version, decoded or not (the epoch check and
	// the memory estimate), and the rows the decoder refused: hidden from readers, still
	// accounted. A version carries them so that dropping a working version (rollback)
	// restores them with it.
	hashSum uint64
	rows    int64
	bytes   int64              // key + raw value bytes of the live rows
	bad     map[string]item[T] // shared between versions: copied before a change (ownBad)
}

// View is a typed, read-only, in-memory copy of one view of the stream. All its methods are
// safe for concurrent use and never block: they read the last published version.
type View[T any] struct {
	name   string
	slot   int    // its place in Client.views and in every Cut
	prefix []byte // esc(name) + "|", the record keys' prefix
	decode Decoder[T]
	c      *Client

	state atomic.Pointer[viewState[T]]

	// Registered before Start, read-only afterwards.
	indexNames map[string]int
	indexFns   []IndexFunc[T]
	handlers   []*handler[T]

	sel     atomic.Pointer[Selection] // nil: the whole view (Register, Reselect)
	w       viewWriter[T]             // owned by the connection goroutine
	mem     atomic.Int64              // key + raw bytes, published with each version (Stats)
	decodes decodeStats               // rows the decoder refused (Stats)
}

func newView[T any](c *Client, name string, decode Decoder[T]) *View[T] {
	v := &View[T]{name: name, prefix: record.KeyPrefix(name), decode: decode, c: c, indexNames: map[string]int{}}
	v.state.Store(&viewState[T]{position: -1})
	return v
}

func (v *View[T]) keyPrefix() []byte { return v.prefix }

// Name returns the view's name.
func (v *View[T]) Name() string { return v.name }

// Get returns the object stored under key, the row's key text: its record key without the
// view prefix, each key column escaped. Build it with [Key] from the key columns' texts;
// a one-column key is escaped too (Get(Key("a|b")), not Get("a|b")).
func (v *View[T]) Get(key string) (T, bool) {
	s := v.state.Load()
	if it, ok := s.root.get(key, hashKey(key)); ok {
		return it.obj, true
	}
	var zero T
	return zero, false
}

// Len returns the number of objects in the view.
func (v *View[T]) Len() int { return v.state.Load().count }

// Position returns the stream position (the record's index in the stream) the view
// reflects: every record of the view up to it has been applied (-1 before the first
// batch).
func (v *View[T]) Position() int64 { return v.state.Load().position }

// Range calls fn for every object of one consistent version of the view, in no particular
// order, until fn returns false. Changes applied meanwhile are not seen.
func (v *View[T]) Range(fn func(key string, obj T) bool) {
	v.state.Load().root.each(func(k string, it *item[T]) bool { return fn(k, it.obj) })
}

// Version returns the view's current version: consistent and immutable, its reads all see
// the same batches. Use it when several reads must agree with each other.
func (v *View[T]) Version() *Version[T] { return &Version[T]{v: v, s: v.state.Load()} }

// AddIndex registers a secondary index. It must be called before the client starts.
func (v *View[T]) AddIndex(name string, fn IndexFunc[T]) error {
	if fn == nil || name == "" {
		return fmt.Errorf("%w: index needs a name and a function", ErrConfig)
	}
	if err := v.c.checkNotStarted(); err != nil {
		return err
	}
	if _, dup := v.indexNames[name]; dup {
		return fmt.Errorf("%w: view %q already has an index %q", ErrConfig, v.name, name)
	}
	v.indexNames[name] = len(v.indexFns)
	v.indexFns = append(v.indexFns, fn)
	return nil
}

// ByIndex returns the objects whose index function returned value, in the order of their
// key texts (byte-wise, as sort.Strings orders them), so that equal views give equal
// answers in every process. The slice is new, but the objects are the ones the view
// holds: treat them as read-only. Unknown index → nil.
func (v *View[T]) ByIndex(index, value string) []T {
	s := Version[T]{v: v, s: v.state.Load()}
	return s.ByIndex(index, value)
}

// ByIndexKeys returns the keys of the objects whose index function returned value, sorted
// (the order of ByIndex).
func (v *View[T]) ByIndexKeys(index, value string) []string {
	s := Version[T]{v: v, s: v.state.Load()}
	return s.ByIndexKeys(index, value)
}

// IndexValues returns the values the index currently holds (each with at least one
// object), sorted.
func (v *View[T]) IndexValues(index string) []string {
	s := Version[T]{v: v, s: v.state.Load()}
	return s.IndexValues(index)
}

// Version is one immutable version of a view, as published by one batch (see
// View.Version). Its methods are safe for concurrent use. It is not a snapshot of the
// stream (the player's bootstrap of a new client): any published state is a version.
type Version[T any] struct {
	v *View[T]
	s *viewState[T]
}

// Get returns the object stored under key (a key text, see View.Get) in this version.
func (s *Version[T]) Get(key string) (T, bool) {
	if it, ok := s.s.root.get(key, hashKey(key)); ok {
		return it.obj, true
	}
	var zero T
	return zero, false
}

// Len returns the number of objects in this version.
func (s *Version[T]) Len() int { return s.s.count }

// Position returns the stream position this version reflects (see View.Position).
func (s *Version[T]) Position() int64 { return s.s.position }

// Range calls fn for every object of this version until fn returns false, in no
// particular order: the trie's, which differs between processes (its hash is seeded at
// start). Sort the keys for an order of your own.
func (s *Version[T]) Range(fn func(key string, obj T) bool) {
	s.s.root.each(func(k string, it *item[T]) bool { return fn(k, it.obj) })
}

func (s *Version[T]) set(index, value string) *keySet {
	i, ok := s.v.indexNames[index]
	if !ok || i >= len(s.s.idx) { // a version older than the index (nothing applied yet)
		return nil
	}
	p, ok := s.s.idx[i].get(value, hashKey(value))
	if !ok {
		return nil
	}
	return *p
}

// ByIndex returns the objects indexed under value in the order of their keys (read-only,
// see View.ByIndex).
func (s *Version[T]) ByIndex(index, value string) []T {
	set := s.set(index, value)
	if set == nil {
		return nil
	}
	// The set is a hash trie: its order is the hash's, seeded per process. Sorting the
	// keys (a value holds few objects; the buffer stays on the stack for up to 32 of them)
	// gives every process the same answer for the same view.
	var buf [32]string
	keys := collectKeys(set, buf[:0])
	slices.Sort(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		if it, ok := s.s.root.get(k, hashKey(k)); ok {
			out = append(out, it.obj)
		}
	}
	return out
}

func collectKeys(n *keySet, out []string) []string {
	for i := range n.leaves {
		out = append(out, n.leaves[i].key)
	}
	for _, ch := range n.nodes {
		out = collectKeys(ch, out)
	}
	return out
}

// ByIndexKeys returns the keys indexed under value, sorted.
func (s *Version[T]) ByIndexKeys(index, value string) []string {
	set := s.set(index, value)
	if set == nil {
		return nil
	}
	out := collectKeys(set, nil)
	slices.Sort(out)
	return out
}

// IndexValues returns the values of an index that have at least one object, sorted.
func (s *Version[T]) IndexValues(index string) []string {
	i, ok := s.v.indexNames[index]
	if !ok || i >= len(s.s.idx) {
		return nil
	}
	var out []string
	s.s.idx[i].each(func(k string, _ **keySet) bool { out = append(out, k); return true })
	slices.Sort(out)
	return out
}
