package capture

import (
	"slices"

	"github.com/statecast/statecast/distributor/internal/pgtree"
)

// A level's bindings closed over its edges (spread), and what reaches its output through
// what it does to rows (restrict): see derive.go.

// spread closes the bindings of l's columns: a base table binds its own columns, the
// equalities carry bindings across, and a column of a base table equated to another
// occurrence's value binds every column of that table through a hop.
func (l *level) spread() {
	// Base tables and subqueries bind the columns the level's expressions use.
	used := map[varRef]bool{}
	for r := range l.binds {
		used[r] = true
	}
	for _, e := range l.edges {
		used[e.from], used[e.to] = true, true
	}
	pgtree.Walk(l.q.List("targetList"), func(n *pgtree.Node) bool {
		if n.Is("SUBLINK") {
			return false
		}
		if r, ok := l.varOf(n); ok {
			used[r] = true
		}
		return true
	})
	for r := range used {
		l.own(r)
	}
	for changed := true; changed; {
		changed = false
		for _, e := range l.edges {
			for _, b := range slices.Clone(l.binds[e.from]) {
				nb := b
				switch e.mode {
				case edgeSame:
					nb.strong = b.strong && !l.nullable(e.from)
				case edgeStrong:
					nb.strong = true
				case edgeWeak:
					nb.strong = false
				}
				if l.bind(e.to, nb) {
					changed = true
				}
			}
		}
		// Hops: a base table column equated to another occurrence's value binds the
		// table's other used columns to the rows that hold that value.
		for r := range used {
			ri := l.rtes[r.rti]
			if r.up > 0 || ri == nil || ri.occ == nil {
				continue
			}
			for _, b := range slices.Clone(l.binds[r]) {
				if b.o == ri.occ || b.src.visits(ri.occ.table) || b.src.hops() >= maxHops {
					continue
				}
				for s := range used {
					if s.up != 0 || s.rti != r.rti || s.att == r.att {
						continue
					}
					src := &valueSrc{from: b.src, tab: ri.occ.table, match: int16(r.att), col: int16(s.att)}
					if l.bind(s, binding{o: b.o, src: src, strong: b.strong}) {
						changed = true
					}
				}
			}
		}
	}
}

// maxHops bounds a value's chain of joined tables.
const maxHops = 4

// own binds column r of a FROM item of l to what the item itself says of it.
func (l *level) own(r varRef) {
	if r.up > 0 {
		return
	}
	ri := l.rtes[r.rti]
	if ri == nil {
		return
	}
	switch {
	case ri.occ != nil:
		l.bind(r, binding{o: ri.occ, src: &valueSrc{col: int16(r.att)}, strong: true})
	case ri.sub != nil && r.att <= len(ri.sub.outputs):
		for _, b := range ri.sub.outputs[r.att-1] {
			l.bind(r, b)
		}
	}
}

func (l *level) nullable(r varRef) bool {
	if r.up > 0 {
		return false
	}
	ri := l.rtes[r.rti]
	return ri != nil && ri.nullable
}

// exprBindings is what an output expression holds: a column's bindings (weak when its
// FROM item is on a nullable side), nothing for any other expression.
func (l *level) exprBindings(e *pgtree.Node) []binding {
	r, ok := l.varOf(e)
	if !ok || r.up > 0 {
		return nil
	}
	l.own(r)
	var out []binding
	for _, b := range l.binds[r] {
		b.strong = b.strong && !l.nullable(r)
		out = append(out, b)
	}
	return out
}

// restrict keeps of the level's output bindings those that what the level does to rows
// lets through, and says of the occurrences that lose every output binding why.
func (l *level) restrict(res *levelResult, tlist, out []*pgtree.Node) {
	q := l.q
	keep := func(j int, ok func(binding) bool) {
		var kept []binding
		for _, b := range res.outputs[j] {
			if ok(b) {
				kept = append(kept, b)
			}
		}
		res.outputs[j] = kept
	}
	had := map[*occ]bool{}
	for _, bs := range res.outputs {
		for _, b := range bs {
			had[b.o] = true
		}
	}
	byRef := map[int64]*pgtree.Node{}
	for _, t := range tlist {
		if ref := t.Int("ressortgroupref"); ref > 0 {
			byRef[ref] = t
		}
	}
	refBindings := func(clauses []*pgtree.Node) map[string]bool {
		ids := map[string]bool{}
		for _, c := range clauses {
			if t := byRef[c.Int("tleSortGroupRef")]; t != nil {
				for _, b := range l.exprBindings(t.Node("expr")) {
					ids[b.id()] = true
				}
			}
		}
		return ids
	}
	var why string
	drop := func(reason string) {
		for j := range res.outputs {
			res.outputs[j] = nil
		}
		why = reason
	}
	switch {
	case q.Field("limitCount") != nil || q.Field("limitOffset") != nil:
		drop("LIMIT or OFFSET")
	case q.List("groupingSets") != nil:
		drop("GROUPING SETS")
	case q.Bool("hasAggs") || q.List("groupClause") != nil:
		groups := q.Nodes("groupClause")
		if len(groups) == 0 {
			drop("an aggregate over all rows")
			break
		}
		grouped := map[*pgtree.Node]bool{}
		for _, g := range groups {
			if t := byRef[g.Int("tleSortGroupRef")]; t != nil {
				grouped[t] = true
			}
		}
		for j, t := range out {
			if !grouped[t] {
				res.outputs[j] = nil
			}
		}
		why = "GROUP BY no column that holds its value"
	}
	if q.Bool("hasWindowFuncs") {
		for _, w := range q.Nodes("windowClause") {
			part := refBindings(w.Nodes("partitionClause"))
			for j := range res.outputs {
				keep(j, func(b binding) bool { return part[b.id()] })
			}
		}
		why = "a window function not partitioned by a column that holds its value"
	}
	if q.Bool("hasDistinctOn") {
		on := refBindings(q.Nodes("distinctClause"))
		for j := range res.outputs {
			keep(j, func(b binding) bool { return on[b.id()] })
		}
		why = "DISTINCT ON no column that holds its value"
	}
	if why == "" {
		return
	}
	left := map[*occ]bool{}
	for _, bs := range res.outputs {
		for _, b := range bs {
			left[b.o] = true
		}
	}
	for o := range had {
		if !left[o] {
			o.lost = why
		}
	}
	for _, o := range res.occs {
		if !had[o] && o.lost == "" && why != "" {
			o.lost = why
		}
	}
}
