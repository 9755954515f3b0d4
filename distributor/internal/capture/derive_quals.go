package capture

import (
	"strings"

	"github.com/statecast/statecast/distributor/internal/pgtree"
)

// The conditions of a level (derive.go): its join and WHERE equalities become edges between
// its columns, and its sublinks bind the outer columns their subselects equate to.

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
	for _, t := range andTerms(cond, true) {
		args := l.equality(t)
		if args == nil {
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
	for _, t := range andTerms(e, false) {
		args := l.equality(t)
		if args == nil {
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

// andTerms returns the AND-ed terms of n: the arguments of an AND (and, when deep, those of
// the ANDs among them), else n alone.
func andTerms(n *pgtree.Node, deep bool) []*pgtree.Node {
	if !n.Is("BOOLEXPR") || n.Atom("boolop") != "and" {
		return []*pgtree.Node{n}
	}
	if !deep {
		return n.Nodes("args")
	}
	var terms []*pgtree.Node
	for _, a := range n.Nodes("args") {
		terms = append(terms, andTerms(a, true)...)
	}
	return terms
}

// equality returns the two arguments of t when it is an equality that a btree or hash
// index can serve (equalityOps), else nil.
func (l *level) equality(t *pgtree.Node) []*pgtree.Node {
	if !t.Is("OPEXPR") || !l.d.eqOps[t.Int("opno")] {
		return nil
	}
	if args := t.Nodes("args"); len(args) == 2 {
		return args
	}
	return nil
}
