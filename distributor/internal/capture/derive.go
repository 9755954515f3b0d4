package capture

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// quals walks a jointree node's conditions: equalities become edges, sublinks bind.
func (l *level) quals(n *pgtree.Node, res *levelResult) {
	switch {
	case n.Is("FROMEXPR"):
		for _, c := range n.Nodes("fromlist") {
			l.quals(c, res)
		}
		l.conjuncts(n.Node("quals"), edgeSame, nil, nil, res)
	case n.Is("JOINEXPR"):
		l.quals(n.Node("larg"), res)
		l.quals(n.Node("rarg"), res)
		left, right := map[int]bool{}, map[int]bool{}
		rtis(n.Node("larg"), left)
		rtis(n.Node("rarg"), right)
		switch jt := n.Int("jointype"); jt {
		case joinInner:
			l.conjuncts(n.Node("quals"), edgeSame, nil, nil, res)
		case joinLeft:
			l.conjuncts(n.Node("quals"), 0, left, right, res)
		case joinRight:
			l.conjuncts(n.Node("quals"), 0, right, left, res)
		default: // FULL: every binding across it is weak
			l.conjuncts(n.Node("quals"), edgeWeak, nil, nil, res)
		}
	}
}

// rtis collects the FROM items below jointree node n, joins included.
func rtis(n *pgtree.Node, into map[int]bool) {
	switch {
	case n.Is("RANGETBLREF"):
		into[int(n.Int("rtindex"))] = true
	case n.Is("JOINEXPR"):
		into[int(n.Int("rtindex"))] = true
		rtis(n.Node("larg"), into)
		rtis(n.Node("rarg"), into)
	case n.Is("FROMEXPR"):
		for _, c := range n.Nodes("fromlist") {
			rtis(c, into)
		}
	}
}

// conjuncts adds the equalities among the AND-ed terms of cond. For an outer join,
// preserved and nullable are its sides: an equality across them carries bindings to the
// preserved side as strong (the null-extended row still holds the preserved column) and to
// the nullable side as weak; one within the nullable side is weak; one within the
// preserved side binds nothing (it only decides which rows match).
func (l *level) conjuncts(cond *pgtree.Node, mode byte, preserved, nullable map[int]bool, res *levelResult) {
	if cond == nil {
		return
	}
	l.sublinks(cond, res)
	var terms []*pgtree.Node
	var and func(n *pgtree.Node)
	and = func(n *pgtree.Node) {
		if n.Is("BOOLEXPR") && n.Atom("boolop") == "and" {
			for _, a := range n.Nodes("args") {
				and(a)
			}
			return
		}
		terms = append(terms, n)
	}
	and(cond)
	for _, t := range terms {
		if !t.Is("OPEXPR") || !l.d.eqOps[t.Int("opno")] {
			continue
		}
		args := t.Nodes("args")
		if len(args) != 2 {
			continue
		}
		a, aok := l.varOf(args[0])
		b, bok := l.varOf(args[1])
		if !aok || !bok {
			// An equality with a sublink's output (x = (SELECT …)) binds nothing here.
			continue
		}
		if preserved == nil {
			l.edges = append(l.edges, edge{a, b, mode}, edge{b, a, mode})
			continue
		}
		side := func(r varRef) byte {
			switch {
			case r.up > 0:
				return 'o' // an outer level's column: as the preserved side
			case nullable[r.rti]:
				return 'n'
			case preserved[r.rti]:
				return 'p'
			}
			return 'p'
		}
		sa, sb := side(a), side(b)
		switch {
		case sa == 'n' && sb == 'n':
			l.edges = append(l.edges, edge{a, b, edgeWeak}, edge{b, a, edgeWeak})
		case sa == 'n':
			l.edges = append(l.edges, edge{a, b, edgeStrong}, edge{b, a, edgeWeak})
		case sb == 'n':
			l.edges = append(l.edges, edge{b, a, edgeStrong}, edge{a, b, edgeWeak})
		}
	}
}

// varOf resolves e to a column of a FROM item: a Var, through binary-compatible casts and
// join alias columns.
func (l *level) varOf(e *pgtree.Node) (varRef, bool) {
	for e.Is("RELABELTYPE") {
		e = e.Node("arg")
	}
	if !e.Is("VAR") {
		return varRef{}, false
	}
	r := varRef{rti: int(e.Int("varno")), att: int(e.Int("varattno")), up: int(e.Int("varlevelsup"))}
	if r.att <= 0 {
		return varRef{}, false // a whole-row or system column
	}
	if r.up == 0 {
		if ri := l.rtes[r.rti]; ri != nil && ri.join != nil {
			vars := ri.join.List("joinaliasvars")
			if r.att > len(vars) {
				return varRef{}, false
			}
			if v, ok := vars[r.att-1].(*pgtree.Node); ok {
				return l.varOf(v)
			}
			return varRef{}, false // a merged column of a FULL JOIN USING
		}
	}
	return r, true
}

// sublinks binds the columns of l that the sublinks in e correlate with their rows, and,
// for x IN (SELECT y …), x to y's bindings.
func (l *level) sublinks(e *pgtree.Node, res *levelResult) {
	pgtree.Walk(e, func(n *pgtree.Node) bool {
		if !n.Is("SUBLINK") {
			return true
		}
		sel := n.Node("subselect")
		if sel == nil {
			return false
		}
		sub := l.d.analyzeQuery(sel, l, "")
		for _, o := range sub.occs {
			if !strings.Contains(o.name, "(in a subquery)") {
				o.name += " (in a subquery)"
			}
		}
		res.occs = append(res.occs, sub.occs...)
		l.addCorr(sub)
		if n.Int("subLinkType") == subLinkAny {
			l.testExpr(n.Node("testexpr"), sub)
		}
		l.sublinks(n.Node("testexpr"), res)
		return false
	})
}

const subLinkAny = 2

// testExpr binds x to the bindings of the subselect's output k for each x = $k (a
// PARAM_SUBLINK) among the AND-ed terms of an ANY sublink's test.
func (l *level) testExpr(e *pgtree.Node, sub *levelResult) {
	var terms []*pgtree.Node
	if e.Is("BOOLEXPR") && e.Atom("boolop") == "and" {
		terms = e.Nodes("args")
	} else {
		terms = []*pgtree.Node{e}
	}
	for _, t := range terms {
		if !t.Is("OPEXPR") || !l.d.eqOps[t.Int("opno")] {
			continue
		}
		args := t.Nodes("args")
		if len(args) != 2 {
			continue
		}
		for i, p := range args {
			for p.Is("RELABELTYPE") {
				p = p.Node("arg")
			}
			if !p.Is("PARAM") || p.Int("paramkind") != paramSublink {
				continue
			}
			k := int(p.Int("paramid")) - 1
			x, ok := l.varOf(args[1-i])
			if !ok || k < 0 || k >= len(sub.outputs) {
				continue
			}
			for _, b := range sub.outputs[k] {
				l.bind(x, b)
			}
		}
	}
}

const paramSublink = 2

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
