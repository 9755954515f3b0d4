package capture

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/statecast/statecast/distributor/internal/pgtree"
)

// How a change of a base-table row reaches a view's rows, derived from PostgreSQL's
// query tree of the view (pgtree), level by level (a level is one Query: the view's own,
// a subquery, a CTE, a database view the query reads, a sublink's subselect).
//
// An occurrence is one place a base table appears in the tree (a table named twice is
// two occurrences). A binding says of an expression of a level — a column of one of its
// FROM items, a column of its output — that it holds, in the rows a change of a row r of
// an occurrence affects, a value derived from r: r's own column (direct), or a column of
// the rows of another table that a join equates to r's column (a hop: teams.id = events.
// home_id binds every column of events to a team change through events.home_id).
//
// A binding is strong when every affected row, before and after the change, holds the
// value; weak when only the rows that hold r do (a column on the nullable side of an
// outer join is NULL in the null-extended row a deletion of r makes appear). A view row
// that held a weakly bound value and holds none now is re-read by its key.
//
// Bindings are made by the FROM items (a base table binds its own columns; a subquery, a
// view, a CTE bind their columns through their outputs), spread by equalities (the
// top-level AND conjuncts of WHERE and of inner join conditions both ways; an outer
// join's condition towards its preserved side), and by sublinks (a correlated subselect,
// EXISTS, IN, a scalar subquery or a LATERAL subquery binds the outer columns its WHERE
// equates to its rows: the rows of the outer query whose sublink's result a change can
// alter hold the changed row's value there). They reach a level's output through plain
// column references in its target list, restricted by what the level does to rows:
// grouping (only grouping columns), window functions (only the columns of every
// window's partition), DISTINCT ON (only its expressions), LIMIT and OFFSET (none), set
// operations (each branch's by position).

// occ is one occurrence of a base table in the view's tree.
type occ struct {
	table *Table
	name  string // how the query names it: "teams AS home", with the views it is read through
	lost  string // why the last level that dropped its bindings did so
}

// valueSrc is where a bound value comes from: column col of the occurrence's changed row
// (from == nil), or column col of the rows of table tab whose column match equals the
// value of from.
type valueSrc struct {
	from  *valueSrc
	tab   *Table
	match int16
	col   int16
}

func (s *valueSrc) hops() int {
	n := 0
	for ; s.from != nil; s = s.from {
		n++
	}
	return n
}

// first is the changed row's own column the value derives from.
func (s *valueSrc) first() int16 {
	for s.from != nil {
		s = s.from
	}
	return s.col
}

// chain is the hops without the last one's result column: two sources with the same
// chain come from the same rows of the last table.
func (s *valueSrc) chain() string {
	if s.from == nil {
		return ""
	}
	return s.from.String() + ">" + strconv.Itoa(int(s.tab.OID)) + "." + strconv.Itoa(int(s.match))
}

func (s *valueSrc) String() string {
	if s.from == nil {
		return strconv.Itoa(int(s.col))
	}
	return s.chain() + "." + strconv.Itoa(int(s.col))
}

// visits reports whether table t is on s's chain (a hop never goes back to a table it
// came through).
func (s *valueSrc) visits(t *Table) bool {
	for ; s != nil; s = s.from {
		if s.tab == t {
			return true
		}
	}
	return false
}

type binding struct {
	o      *occ
	src    *valueSrc
	strong bool
}

func (b binding) id() string { return fmt.Sprintf("%p/%s", b.o, b.src) }

// varRef is a column of a FROM item of a level (rti, att), or of a level up above it.
type varRef struct {
	rti, att, up int
}

// levelResult is what a level gives the level that reads it.
type levelResult struct {
	outputs [][]binding          // per output column (the non-junk target list, in order)
	corr    map[varRef][]binding // bindings of outer levels' columns (up ≥ 1, relative to this level)
	occs    []*occ
}

// deriver holds what an analysis of one view shares across its levels: the catalog
// facts (tables, equality operators, view definitions) loaded before it runs.
type deriver struct {
	tables    map[uint32]*Table
	eqOps     map[int64]bool
	views     map[uint32]*pgtree.Node // database views the tree reads: their queries
	occs      []*occ
	viewNames map[uint32]string
}

func (d *deriver) viewName(oid uint32) string { return d.viewNames[oid] }

type rteInfo struct {
	node     *pgtree.Node
	occ      *occ         // a base table
	sub      *levelResult // a subquery, a view, a CTE
	join     *pgtree.Node // a join: its alias columns
	nullable bool         // on the nullable side of an outer join of the level
}

// level is one Query being analyzed.
type level struct {
	d      *deriver
	q      *pgtree.Node
	parent *level
	rtes   map[int]*rteInfo
	binds  map[varRef][]binding
	edges  []edge
	seen   map[varRef]map[string]bool
}

// edge is an equality between two columns of a level: from's bindings reach to.
type edge struct {
	from, to varRef
	// how the binding's strength carries: same (an inner equality), strong (an outer
	// join's condition towards its preserved side), weak (towards a nullable side).
	mode byte
}

const (
	edgeSame   = 's'
	edgeStrong = '+'
	edgeWeak   = '-'
)

// analyzeQuery derives the bindings of query q, a level below parent (nil for the view).
func (d *deriver) analyzeQuery(q *pgtree.Node, parent *level, name string) *levelResult {
	l := &level{d: d, q: q, parent: parent, rtes: map[int]*rteInfo{}, binds: map[varRef][]binding{}, seen: map[varRef]map[string]bool{}}
	res := &levelResult{corr: map[varRef][]binding{}}
	rtable := q.Nodes("rtable")
	rte := func(rti int) *pgtree.Node {
		if rti < 1 || rti > len(rtable) {
			return nil
		}
		return rtable[rti-1]
	}
	// FROM items: the jointree's, and a set operation's branches.
	var items []int
	var walkJoin func(n *pgtree.Node, nullable bool)
	walkJoin = func(n *pgtree.Node, nullable bool) {
		switch {
		case n.Is("RANGETBLREF"):
			rti := int(n.Int("rtindex"))
			items = append(items, rti)
			l.rtes[rti] = &rteInfo{node: rte(rti), nullable: nullable}
		case n.Is("JOINEXPR"):
			jt := n.Int("jointype")
			walkJoin(n.Node("larg"), nullable || jt == joinRight || jt == joinFull)
			walkJoin(n.Node("rarg"), nullable || jt == joinLeft || jt == joinFull)
			if rti := int(n.Int("rtindex")); rti > 0 {
				l.rtes[rti] = &rteInfo{node: rte(rti), join: rte(rti), nullable: nullable}
			}
		case n.Is("FROMEXPR"):
			for _, c := range n.Nodes("fromlist") {
				walkJoin(c, nullable)
			}
		}
	}
	walkJoin(q.Node("jointree"), false)
	var leaves []int
	if so := q.Node("setOperations"); so != nil {
		var walkSet func(n *pgtree.Node)
		walkSet = func(n *pgtree.Node) {
			if n.Is("RANGETBLREF") {
				rti := int(n.Int("rtindex"))
				leaves = append(leaves, rti)
				l.rtes[rti] = &rteInfo{node: rte(rti)}
				return
			}
			walkSet(n.Node("larg"))
			walkSet(n.Node("rarg"))
		}
		walkSet(so)
	}
	for _, rti := range append(slices.Clone(items), leaves...) {
		ri := l.rtes[rti]
		if ri == nil || ri.node == nil {
			continue
		}
		l.fromItem(rti, ri, name)
		if ri.occ != nil {
			res.occs = append(res.occs, ri.occ)
		}
		if ri.sub != nil {
			res.occs = append(res.occs, ri.sub.occs...)
		}
	}
	// Equalities and sublinks of the join conditions and WHERE.
	l.quals(q.Node("jointree"), res)
	for _, n := range q.Nodes("targetList") {
		l.sublinks(n.Node("expr"), res)
	}
	l.sublinks(q.Node("havingQual"), res)
	l.spread()
	for r, bs := range l.binds {
		if r.up > 0 {
			res.corr[r] = append(res.corr[r], bs...)
		}
	}

	// The level's output.
	tlist := q.Nodes("targetList")
	var out []*pgtree.Node
	for _, t := range tlist {
		if !t.Bool("resjunk") {
			out = append(out, t)
		}
	}
	res.outputs = make([][]binding, len(out))
	if len(leaves) > 0 {
		for _, rti := range leaves {
			ri := l.rtes[rti]
			if ri == nil || ri.sub == nil {
				continue
			}
			for j := range res.outputs {
				if j < len(ri.sub.outputs) {
					res.outputs[j] = append(res.outputs[j], ri.sub.outputs[j]...)
				}
			}
		}
	} else {
		for j, t := range out {
			res.outputs[j] = l.exprBindings(t.Node("expr"))
		}
	}
	l.restrict(res, tlist, out)
	return res
}

const (
	joinInner = 0
	joinLeft  = 1
	joinFull  = 2
	joinRight = 3
)

// fromItem binds the columns of FROM item rti.
func (l *level) fromItem(rti int, ri *rteInfo, name string) {
	n := ri.node
	alias := func() string {
		if a := n.Node("alias"); a != nil {
			return a.Atom("aliasname")
		}
		return ""
	}
	switch n.Int("rtekind") {
	case rteRelation:
		relid := uint32(n.Int("relid"))
		if v := l.d.views[relid]; v != nil {
			vname := l.d.viewName(relid)
			ri.sub = l.d.analyzeQuery(v, nil, join(name, "in "+vname))
			return
		}
		t := l.d.tables[relid]
		if t == nil {
			return
		}
		o := &occ{table: t, name: t.String()}
		if a := alias(); a != "" && a != t.Name {
			o.name += " AS " + a
		}
		o.name = join(o.name, name)
		ri.occ = o
		l.d.occs = append(l.d.occs, o)
	case rteSubquery:
		sub := n.Node("subquery")
		if sub == nil {
			return
		}
		ri.sub = l.d.analyzeQuery(sub, l, name)
		l.addCorr(ri.sub)
	case rteCTE:
		if n.Bool("self_reference") {
			return // a recursive CTE's reference to itself: the CTE is marked below
		}
		cte, def := l.cte(n.Atom("ctename"), int(n.Int("ctelevelsup")))
		if cte == nil {
			return
		}
		ri.sub = l.d.analyzeQuery(cte.Node("ctequery"), def, join(name, "in WITH "+n.Atom("ctename")))
		if cte.Bool("cterecursive") {
			for _, o := range ri.sub.occs {
				o.lost = "a recursive query"
			}
			ri.sub.outputs = make([][]binding, len(ri.sub.outputs))
			ri.sub.corr = nil
		}
		l.addCorr(ri.sub)
	}
}

const (
	rteRelation = 0
	rteSubquery = 1
	rteJoin     = 2
	rteCTE      = 6
)

func join(a, b string) string {
	switch {
	case b == "":
		return a
	case a == "":
		return b
	}
	return a + " " + b
}

// cte finds the CTE called name defined up levels above l (0: by l's own query), and the
// level that defines it.
func (l *level) cte(name string, up int) (*pgtree.Node, *level) {
	at := l
	for i := 0; i < up && at != nil; i++ {
		at = at.parent
	}
	if at == nil {
		return nil, nil
	}
	for _, c := range at.q.Nodes("cteList") {
		if c.Atom("ctename") == name {
			return c, at
		}
	}
	return nil, nil
}

// addCorr takes a subquery's (or sublink's) bindings of the columns of l and above.
func (l *level) addCorr(sub *levelResult) {
	for r, bs := range sub.corr {
		r.up--
		for _, b := range bs {
			l.bind(r, b)
		}
	}
}

func (l *level) bind(r varRef, b binding) bool {
	seen := l.seen[r]
	if seen == nil {
		seen = map[string]bool{}
		l.seen[r] = seen
	}
	// A strong binding replaces a weak one of the same source.
	id := b.id()
	if seen[id] {
		if !b.strong {
			return false
		}
		for i, o := range l.binds[r] {
			if o.id() == id && !o.strong {
				l.binds[r][i].strong = true
				return true
			}
		}
		return false
	}
	seen[id] = true
	l.binds[r] = append(l.binds[r], b)
	return true
}
