package player

import (
	"math"
	"slices"
	"strconv"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"

	"github.com/statecast/statecast/schemas/record"
)

// The index of the selections of a view (viewIndex): the dispatcher pushes a row only to
// the selecting targets that can receive it. A selection whose filter has a top-level
// conjunct `col == literal` or `col in [literals]` (an AND chain; a grant's filter ANDed
// with the target's is one; the first such conjunct), or an OR whose every branch has one
// on the same column (`col == 1 || col == 2 && x > 3`: col in [1, 2]), is indexed by that
// column's values; one without such a part
// but with a shard, by its shard; any other is scanned. A target is a candidate for a row
// change when its indexed value is the new row's or the previous row's (a move out): for
// any other, the conjunct is false on both rows, so the filter is, and choose would give
// nothing. TestFilterIndexRandom checks the candidates against every target's filter.

// eqPart is the indexed conjunct of a filter: column col equals one of vals (indexKey).
type eqPart struct {
	col  string
	vals []string
}

// eqPartOf returns the first top-level equality or IN conjunct of a compiled filter, or,
// for an OR, a column that every branch has a part on, with the union of their values.
func eqPartOf(ast *cel.Ast) *eqPart {
	if ps := eqParts(ast.NativeRep().Expr()); len(ps) > 0 {
		return ps[0]
	}
	return nil
}

// exactPart returns the filter's equality part when the filter is that part alone: one
// `col == literal` (either way round) or `col in [literals]`, each literal with an index
// key. Under CEL's equality such a filter is true exactly when the column's value has
// one of the part's index keys (indexKey: values of different types are unequal, ints
// and doubles compare by value), and false when the row lacks the column (an error).
func exactPart(ast *cel.Ast) *eqPart {
	e := ast.NativeRep().Expr()
	if e.Kind() != celast.CallKind {
		return nil
	}
	if fn := e.AsCall().FunctionName(); fn != operators.Equals && fn != operators.In {
		return nil
	}
	if ps := eqParts(e); len(ps) == 1 {
		return ps[0]
	}
	return nil
}

// eqParts returns the parts e implies, in order: each conjunct's of an AND; of an OR, one
// per column that every branch implies a part on (the union of the branches' values).
func eqParts(e celast.Expr) []*eqPart {
	if e.Kind() != celast.CallKind {
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd:
		var out []*eqPart
		for _, a := range args {
			out = append(out, eqParts(a)...)
		}
		return out
	case operators.LogicalOr:
		var branches [][]*eqPart
		for _, a := range args {
			ps := eqParts(a)
			if len(ps) == 0 {
				return nil
			}
			branches = append(branches, ps)
		}
		var out []*eqPart
	cols:
		for _, first := range branches[0] {
			if slices.ContainsFunc(out, func(p *eqPart) bool { return p.col == first.col }) {
				continue
			}
			u := &eqPart{col: first.col, vals: slices.Clone(first.vals)}
			for _, b := range branches[1:] {
				i := slices.IndexFunc(b, func(p *eqPart) bool { return p.col == first.col })
				if i < 0 {
					continue cols
				}
				u.vals = append(u.vals, b[i].vals...)
			}
			out = append(out, u)
		}
		return out
	case operators.Equals:
		if len(args) == 2 {
			if p := identLiterals(args[0], args[1:]); p != nil {
				return []*eqPart{p}
			}
			if p := identLiterals(args[1], args[:1]); p != nil {
				return []*eqPart{p}
			}
		}
	case operators.In:
		if len(args) == 2 && args[1].Kind() == celast.ListKind {
			if p := identLiterals(args[0], args[1].AsList().Elements()); p != nil {
				return []*eqPart{p}
			}
		}
	}
	return nil
}

// identLiterals is the part `id == one of lits` when id is a column and every lit a
// literal with an index key.
func identLiterals(id celast.Expr, lits []celast.Expr) *eqPart {
	if id.Kind() != celast.IdentKind || len(lits) == 0 {
		return nil
	}
	p := &eqPart{col: id.AsIdent()}
	for _, l := range lits {
		if l.Kind() != celast.LiteralKind {
			return nil
		}
		v := l.AsLiteral().Value()
		k, ok := indexKey(v)
		if !ok || !exactNumber(v) {
			return nil
		}
		p.vals = append(p.vals, k)
	}
	return p
}

// exactNumber reports whether v, when a number, is within ±2^53, where every integer is
// a double too. CEL compares ints, uints and doubles by value through doubles, and a row
// decodes an integer beyond int64 as a double: beyond 2^53 two numbers CEL finds equal may
// have different keys, so such a literal is not indexed (its filter is scanned).
func exactNumber(v any) bool {
	const limit = 1 << 53
	switch x := v.(type) {
	case int64:
		return x >= -limit && x <= limit
	case uint64:
		return x <= limit
	case float64:
		return x >= -limit && x <= limit
	}
	return true
}

// indexKey is the index's text of a scalar: equal under CEL's equality (an int and a
// double of the same value are equal) gives the same key. false: not indexable.
func indexKey(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "z", true
	case bool:
		return "b" + strconv.FormatBool(x), true
	case string:
		return "s" + x, true
	case int64:
		return "n" + strconv.FormatInt(x, 10), true
	case uint64:
		return "n" + strconv.FormatUint(x, 10), true
	case float64:
		// An integral double is keyed as the integer it equals, exactly: ±2^63 and 2^64
		// are doubles, and every double in [-2^63, 2^64) that is integral converts.
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<64 {
			if x < 1<<63 {
				return "n" + strconv.FormatInt(int64(x), 10), true
			}
			return "n" + strconv.FormatUint(uint64(x), 10), true
		}
		return "f" + strconv.FormatFloat(x, 'g', -1, 64), true
	}
	if _, isNull := v.(interface{ IsNull() }); isNull {
		return "z", true
	}
	return "", false
}

// viewIndex holds the selecting targets of one view (targets with a selection of it),
// guarded by stream.mu.
type viewIndex struct {
	all    map[*target]struct{}
	scan   map[*target]struct{}            // neither an equality part nor a shard
	byCol  map[string]map[string]targetSet // column -> index key -> targets
	shards map[uint32]map[uint32]targetSet // shard count -> shard -> targets
}

func newViewIndex() *viewIndex {
	return &viewIndex{all: map[*target]struct{}{}, scan: map[*target]struct{}{},
		byCol: map[string]map[string]targetSet{}, shards: map[uint32]map[uint32]targetSet{}}
}

// targetSet is the targets of one index key. It holds the first without a map: with a
// distinct filter per target, most keys name one target, and a map each would cost
// hundreds of bytes per target.
type targetSet struct {
	one  *target
	more map[*target]struct{}
}

func (ts targetSet) has(t *target) bool {
	if ts.one == t {
		return t != nil
	}
	_, ok := ts.more[t]
	return ok
}

func (ts targetSet) each(fn func(*target)) {
	if ts.one != nil {
		fn(ts.one)
	}
	for t := range ts.more {
		fn(t)
	}
}

// eachNotIn calls fn for each target of ts that other does not hold.
func (ts targetSet) eachNotIn(other targetSet, fn func(*target)) {
	if ts.one != nil && !other.has(ts.one) {
		fn(ts.one)
	}
	for t := range ts.more {
		if !other.has(t) {
			fn(t)
		}
	}
}

func addTo[K comparable](m map[K]targetSet, k K, t *target) {
	ts := m[k]
	switch {
	case ts.has(t):
	case ts.one == nil:
		ts.one = t
	default:
		if ts.more == nil {
			ts.more = map[*target]struct{}{}
		}
		ts.more[t] = struct{}{}
	}
	m[k] = ts
}

func delFrom[K comparable](m map[K]targetSet, k K, t *target) {
	ts, ok := m[k]
	if !ok {
		return
	}
	if ts.one == t {
		ts.one = nil
		for o := range ts.more { // keep one in the slot that needs no map
			ts.one = o
			delete(ts.more, o)
			break
		}
	} else {
		delete(ts.more, t)
	}
	if ts.one == nil {
		delete(m, k)
	} else {
		m[k] = ts
	}
}

func (x *viewIndex) add(t *target, sel *selection) {
	x.all[t] = struct{}{}
	switch {
	case sel.eq != nil:
		vm := x.byCol[sel.eq.col]
		if vm == nil {
			vm = map[string]targetSet{}
			x.byCol[sel.eq.col] = vm
		}
		for _, v := range sel.eq.vals {
			addTo(vm, v, t)
		}
	case sel.shards > 0:
		sm := x.shards[sel.shards]
		if sm == nil {
			sm = map[uint32]targetSet{}
			x.shards[sel.shards] = sm
		}
		addTo(sm, sel.shard, t)
	default:
		x.scan[t] = struct{}{}
	}
}

func (x *viewIndex) remove(t *target, sel *selection) {
	delete(x.all, t)
	delete(x.scan, t)
	if sel.eq != nil {
		if vm := x.byCol[sel.eq.col]; vm != nil {
			for _, v := range sel.eq.vals {
				delFrom(vm, v, t)
			}
			if len(vm) == 0 {
				delete(x.byCol, sel.eq.col)
			}
		}
	}
	if sm := x.shards[sel.shards]; sel.eq == nil && sm != nil {
		delFrom(sm, sel.shard, t)
		if len(sm) == 0 {
			delete(x.shards, sel.shards)
		}
	}
}

// candidates calls fn once for every target that may receive something of the row change
// cur (prev: the key's row before it, nil when none): see the comment at the top.
func (x *viewIndex) candidates(cur, prev *rowVals, fn func(*target)) {
	for t := range x.scan {
		fn(t)
	}
	key := cur.it.key
	for n, sm := range x.shards {
		sm[record.ShardString(key, n)].each(fn)
	}
	if len(x.byCol) == 0 {
		return
	}
	curVals, _ := cur.values()
	var prevVals map[string]any
	if prev != nil {
		prevVals, _ = prev.values()
	}
	for col, vm := range x.byCol {
		var cs targetSet
		if v, ok := curVals[col]; ok && !cur.it.tombstone {
			if k, ok := indexKey(v); ok {
				cs = vm[k]
				cs.each(fn)
			}
		}
		if v, ok := prevVals[col]; ok {
			if k, ok := indexKey(v); ok {
				vm[k].eachNotIn(cs, fn)
			}
		}
	}
}
