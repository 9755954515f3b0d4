package capture

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/pgtree"
)

// The trees a view's analysis reads, from the catalog: the query PostgreSQL stored for a
// view (its _RETURN rule, pg_rewrite.ev_action: the SQL parsed and analyzed by the server,
// other views left as references), and the facts about operators and functions the tree
// names by OID.

// viewQuery reads the stored query of view oid.
func viewQuery(ctx context.Context, tx pgx.Tx, oid uint32) (*pgtree.Node, error) {
	var text string
	if err := tx.QueryRow(ctx, "SELECT ev_action::text FROM pg_rewrite WHERE ev_class = $1 AND rulename = '_RETURN'", oid).Scan(&text); err != nil {
		return nil, err
	}
	v, err := pgtree.Read(text)
	if err != nil {
		return nil, err
	}
	l, _ := v.(pgtree.List)
	if len(l) != 1 {
		return nil, fmt.Errorf("view %d: its rule holds %d queries, want 1", oid, len(l))
	}
	q, _ := l[0].(*pgtree.Node)
	if !q.Is("QUERY") {
		return nil, fmt.Errorf("view %d: its rule is no query", oid)
	}
	return q, nil
}

// loadTrees reads the query of view oid and of every database view it reads, through
// any depth: views[oid] is each one's query.
func loadTrees(ctx context.Context, tx pgx.Tx, oid uint32) (top *pgtree.Node, views map[uint32]*pgtree.Node, err error) {
	if top, err = viewQuery(ctx, tx, oid); err != nil {
		return nil, nil, err
	}
	views = map[uint32]*pgtree.Node{}
	todo := referencedViews(top)
	for len(todo) > 0 {
		v := todo[0]
		todo = todo[1:]
		if _, done := views[v]; done {
			continue
		}
		q, err := viewQuery(ctx, tx, v)
		if err != nil {
			return nil, nil, err
		}
		views[v] = q
		todo = append(todo, referencedViews(q)...)
	}
	return top, views, nil
}

// referencedViews lists the views q's range tables name (in subqueries too). A view's
// stored query names itself as OLD and NEW, outside its FROM clause: skipped by the
// caller's having read it already, or harmless.
func referencedViews(q *pgtree.Node) []uint32 {
	var out []uint32
	pgtree.Walk(q, func(n *pgtree.Node) bool {
		if n.Is("RANGETBLENTRY") && n.Int("rtekind") == rteRelation && n.Atom("relkind") == "v" && n.Bool("inFromCl") {
			out = append(out, uint32(n.Int("relid")))
		}
		return true
	})
	return out
}

// equalityOps returns which of the operators the trees name are equalities that a btree
// or hash index can serve: x = y under them means the values are the same for lookups.
func equalityOps(ctx context.Context, tx pgx.Tx, trees ...*pgtree.Node) (map[int64]bool, error) {
	var ops []int64
	for _, t := range trees {
		pgtree.Walk(t, func(n *pgtree.Node) bool {
			if n.Is("OPEXPR") {
				ops = append(ops, n.Int("opno"))
			}
			return true
		})
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT amopopr::int8 FROM pg_amop a JOIN pg_am m ON m.oid = a.amopmethod
		WHERE a.amopopr = ANY($1::oid[]) AND ((m.amname = 'btree' AND a.amopstrategy = 3) OR (m.amname = 'hash' AND a.amopstrategy = 1))`, ops)
	if err != nil {
		return nil, err
	}
	eq, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, o := range eq {
		out[o] = true
	}
	return out, nil
}

// volatileFunctions names the volatile functions the trees call (directly or as an
// operator's function): a view that calls one can change without a change of its tables.
func volatileFunctions(ctx context.Context, tx pgx.Tx, trees ...*pgtree.Node) ([]string, error) {
	var fns []int64
	for _, t := range trees {
		pgtree.Walk(t, func(n *pgtree.Node) bool {
			switch {
			case n.Is("FUNCEXPR"):
				fns = append(fns, n.Int("funcid"))
			case n.Is("OPEXPR"):
				fns = append(fns, n.Int("opfuncid"))
			case n.Is("AGGREF"):
				fns = append(fns, n.Int("aggfnoid"))
			case n.Is("WINDOWFUNC"):
				fns = append(fns, n.Int("winfnoid"))
			}
			return true
		})
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT p.oid::regprocedure::text FROM pg_proc p WHERE p.oid = ANY($1::oid[]) AND p.provolatile = 'v' ORDER BY 1`, fns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
