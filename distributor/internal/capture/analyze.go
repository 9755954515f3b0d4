package capture

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/pgtree"
)

// ViewSpec is what Analyze needs to know about a view.
type ViewSpec struct {
	Name string
	SQL  string
	Key  []string // key columns, in order
	// Tables adds base tables the SQL reads without PostgreSQL knowing it (e.g. inside a
	// function the view calls). Names are resolved with the session's search_path.
	Tables []string
	// Depends maps a base table to the output columns that hold its identity, for joins
	// whose identity columns are not selected from the table itself (e.g. the view selects
	// e.competition_id, which equals competitions.id by the join). The columns must be in
	// the order of the table's identity columns and of the same types.
	Depends map[string][]string
}

// Column is a table or view column.
type Column struct {
	Num     int16 // attnum (for a view's output: its position, from 1)
	Name    string
	TypeOID uint32
	// The type's array type and its SQL name (format_type); Enum is filled for a view's
	// output columns only.
	ArrayOID uint32
	TypeName string
	Enum     bool
}

// Table is a base table a view reads.
type Table struct {
	OID    uint32
	Schema string
	Name   string
	// Partitioned: a partitioned table; changes of its partitions are published as its own
	// (publish_via_partition_root).
	Partitioned bool
	// Identity is the table's replica identity: the primary key, else the replica identity
	// index, else (REPLICA IDENTITY FULL) every column. pgoutput sends these columns in the
	// old tuple of updates and deletes.
	Identity []Column
	// ReplIdent is pg_class.relreplident: 'd' default, 'i' index, 'f' full ('n' is refused).
	ReplIdent byte
	// Columns are the table's columns by attribute number.
	Columns map[int16]Column
}

// QualifiedName is "schema.name", quoted where needed.
func (t *Table) QualifiedName() string {
	return pgx.Identifier{t.Schema, t.Name}.Sanitize()
}

func (t *Table) String() string {
	if t.Schema == "public" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Mapping says how a change of one occurrence of Table (a table named twice has two)
// reaches the view: the rows to re-read are those whose output columns Cols hold values
// derived from the changed row, old and new — its columns TableCols themselves (no
// Hops), or the values the Hops' joins give for its column TableCols[0].
type Mapping struct {
	Table *Table
	// Occurrence is how the query names this occurrence ("teams AS home", "markets (in a
	// subquery) in sb.event_board").
	Occurrence string
	Cols       []int    // output column indexes
	TableCols  []Column // without Hops: one per Col; with Hops: the one the first hop matches
	Hops       []Hop
	// IsKey: Cols are the view's key columns (in any order): the values are view keys.
	IsKey bool
	// Strong: every view row the change affects, before and after, holds the values;
	// else only the rows that hold the changed row do, and the rows that held the values
	// and hold none now are re-read by key (a row of an outer join's nullable side).
	Strong bool
	// Hinted: declared in ViewSpec.Depends rather than found in the query.
	Hinted bool
	// Via says how the analysis found it, for Describe.
	Via string
}

// Hop is one join of a mapping's chain: the rows of Table whose column Match equals the
// previous values give their columns Out (one, the next hop's values; the last hop's,
// one per Mapping.Cols).
type Hop struct {
	Table *Table
	Match Column
	Out   []Column
}

// ViewDeps is how a view depends on its base tables.
type ViewDeps struct {
	View   string
	Tables []*Table // every base table, sorted by name
	// Maps holds the mapped tables by OID, a Mapping per occurrence; a table absent from it
	// is unmapped: any change of it re-reads the whole view. Unmapped[oid] says why.
	Maps     map[uint32][]*Mapping
	Unmapped map[uint32]string
	// NeedFull are the unmapped tables a mapping would read through columns outside their
	// replica identity: mapped once they have REPLICA IDENTITY FULL (SetReplicaIdentityFull).
	NeedFull []*Table
	// Notes are what else the analysis found (volatile functions: rows that change
	// without a change of any table).
	Notes []string
	// Columns are the view's output columns (name, type) and Key the indexes of its key
	// columns.
	Columns []Column
	Key     []int
	// Definition is the query as PostgreSQL reads it (pg_get_viewdef of the temporary view:
	// names resolved, a * expanded, the text's layout gone), then the definition of every
	// database view it reads, by name: what two analyses compare to know whether the view's
	// rows are defined alike.
	Definition string

	// structural holds the tables unmapped for what the query does to rows (a LIMIT, a
	// recursion, an aggregate over all rows…): no declared mapping makes them mappable.
	structural map[uint32]bool
}

// Table returns the base table with the given OID, or nil.
func (d *ViewDeps) Table(oid uint32) *Table {
	for _, t := range d.Tables {
		if t.OID == oid {
			return t
		}
	}
	return nil
}

// Describe is a one-line summary per table of how its changes reach the view (cachectl
// validate prints it), then the notes.
func (d *ViewDeps) Describe() []string {
	var out []string
	for _, t := range d.Tables {
		ms := d.Maps[t.OID]
		if ms == nil {
			out = append(out, fmt.Sprintf("%s: full re-read of the view on every change (%s)", t, d.Unmapped[t.OID]))
			continue
		}
		var parts []string
		for _, m := range ms {
			parts = append(parts, d.describe(m, len(ms) > 1))
		}
		out = append(out, fmt.Sprintf("%s: %s", t, strings.Join(parts, "; ")))
	}
	return append(out, d.Notes...)
}

// describe says how one mapping reaches the view; the occurrence is named when the table
// has several, or is read through a view or a subquery.
func (d *ViewDeps) describe(m *Mapping, several bool) string {
	names := make([]string, len(m.Cols))
	for i, c := range m.Cols {
		names[i] = d.Columns[c].Name
	}
	var b strings.Builder
	nested := strings.Contains(m.Occurrence, " in ") || strings.Contains(m.Occurrence, "(in a subquery)")
	if m.Occurrence != "" && m.Occurrence != m.Table.String() && (several || nested) {
		b.WriteString("as " + m.Occurrence + ", ")
	}
	if m.IsKey {
		b.WriteString("by the view's key")
	} else {
		b.WriteString("by column(s) " + strings.Join(names, ", "))
	}
	if len(m.Hops) > 0 {
		var via []string
		from := m.Table.String() + "." + m.TableCols[0].Name
		for _, h := range m.Hops {
			via = append(via, fmt.Sprintf("%s.%s = %s", h.Table, h.Match.Name, from))
			from = h.Table.String() + "." + h.Out[0].Name
		}
		b.WriteString(" (through " + strings.Join(via, ", ") + ")")
	} else if !m.IsKey || len(m.TableCols) > 0 && !sameNames(m.TableCols, names) {
		cols := make([]string, len(m.TableCols))
		for i, c := range m.TableCols {
			cols[i] = c.Name
		}
		if !sameNames(m.TableCols, names) {
			b.WriteString(" = " + m.Table.String() + "." + strings.Join(cols, ", "))
		}
	}
	switch {
	case m.Hinted:
		b.WriteString(" (declared in depends)")
	case m.Via != "":
		b.WriteString(" (" + m.Via + ")")
	}
	if !m.Strong {
		b.WriteString(", rows that lose it re-read by key")
	}
	return b.String()
}

func sameNames(cols []Column, names []string) bool {
	if len(cols) != len(names) {
		return false
	}
	for i, c := range cols {
		if c.Name != names[i] {
			return false
		}
	}
	return true
}

// ErrAnalyze wraps the errors of Analyze that name a view's unusable table or column.
var ErrAnalyze = errors.New("capture")

var tempSeq atomic.Int64

// Analyze finds the base tables of v and how each one's changes map to v's rows, from
// the query tree PostgreSQL stores for a temporary view of v's SQL (and for the views it
// reads). It runs in tx (it creates and drops that view; the caller may roll tx back). Its
// first statement is CheckStatement's: a SQL of more than one statement is refused
// (ErrStatement, wrapped in ErrAnalyze) before any of it runs, and tx is then aborted.
func Analyze(ctx context.Context, tx pgx.Tx, v ViewSpec) (*ViewDeps, error) {
	// The SQL is pasted into the statements below: it is parsed alone first, with the
	// extended protocol, so that a second statement in it cannot run (CheckStatement).
	if err := CheckStatement(ctx, tx.Conn().PgConn(), v.Name, v.SQL); errors.Is(err, ErrStatement) {
		return nil, fmt.Errorf("%w: %w", ErrAnalyze, err)
	} else if err != nil {
		return nil, fmt.Errorf("%w: view %q: its SQL cannot define a view: %w", ErrAnalyze, v.Name, err)
	}
	name := fmt.Sprintf("statecast_analyze_%d", tempSeq.Add(1))
	// An Exec without arguments goes through the simple protocol; the extended one
	// (QueryExecModeExec) runs one statement at most, whatever the SQL holds.
	if _, err := tx.Exec(ctx, "CREATE TEMPORARY VIEW "+name+" AS "+v.SQL, pgx.QueryExecModeExec); err != nil {
		return nil, fmt.Errorf("%w: view %q: its SQL cannot define a view: %w", ErrAnalyze, v.Name, err)
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "DROP VIEW IF EXISTS pg_temp."+name) }()
	d := &ViewDeps{View: v.Name, Maps: map[uint32][]*Mapping{}, Unmapped: map[uint32]string{}}
	if err := d.loadColumns(ctx, tx, v); err != nil {
		return nil, err
	}
	oids, err := baseTables(ctx, tx, "pg_temp."+name, v.Name)
	if err != nil {
		return nil, err
	}
	var extra []uint32
	for _, t := range append(slices.Clone(v.Tables), mapKeys(v.Depends)...) {
		var oid uint32
		if err := tx.QueryRow(ctx, "SELECT $1::regclass::oid", t).Scan(&oid); err != nil {
			return nil, fmt.Errorf("%w: view %q: table %q: %w", ErrAnalyze, v.Name, t, err)
		}
		if !slices.Contains(oids, oid) {
			oids = append(oids, oid)
			extra = append(extra, oid)
		}
	}
	tables := map[uint32]*Table{}
	for _, oid := range oids {
		t, err := loadTable(ctx, tx, oid, v.Name)
		if err != nil {
			return nil, err
		}
		d.Tables = append(d.Tables, t)
		tables[oid] = t
	}
	slices.SortFunc(d.Tables, func(a, b *Table) int { return strings.Compare(a.String(), b.String()) })

	var viewOID uint32
	if err := tx.QueryRow(ctx, "SELECT $1::regclass::oid", "pg_temp."+name).Scan(&viewOID); err != nil {
		return nil, err
	}
	top, views, err := loadTrees(ctx, tx, viewOID)
	if err != nil {
		return nil, fmt.Errorf("%w: view %q: its query tree: %w", ErrAnalyze, v.Name, err)
	}
	trees := []*pgtree.Node{top}
	for _, q := range views {
		trees = append(trees, q)
	}
	dv := &deriver{tables: tables, views: views, viewNames: map[uint32]string{}}
	if dv.eqOps, err = equalityOps(ctx, tx, trees...); err != nil {
		return nil, err
	}
	for oid := range views {
		var n string
		if err := tx.QueryRow(ctx, "SELECT $1::regclass::text", oid).Scan(&n); err != nil {
			return nil, err
		}
		dv.viewNames[oid] = n
	}
	if d.Definition, err = definition(ctx, tx, viewOID, dv.viewNames); err != nil {
		return nil, err
	}
	vol, err := volatileFunctions(ctx, tx, trees...)
	if err != nil {
		return nil, err
	}
	for _, f := range vol {
		d.Notes = append(d.Notes, fmt.Sprintf("calls volatile function %s: its rows can change without a change of its tables (a reconcile, refresh_cron, corrects them)", f))
	}
	res := dv.analyzeQuery(top, nil, "")
	d.route(res)
	for _, oid := range extra {
		if d.Maps[oid] == nil {
			d.Unmapped[oid] = "not in the query's tree (read inside a function? declared in tables)"
		}
	}
	return d, d.applyHints(ctx, tx, v)
}

// definition is ViewDeps.Definition: the view's deparsed query, then each database view
// it reads (names: oid → name), in the order of their names.
func definition(ctx context.Context, tx pgx.Tx, view uint32, names map[uint32]string) (string, error) {
	oids := slices.Collect(maps.Keys(names))
	slices.SortFunc(oids, func(a, b uint32) int { return strings.Compare(names[a], names[b]) })
	var b strings.Builder
	for _, oid := range append([]uint32{view}, oids...) {
		var def string
		if err := tx.QueryRow(ctx, "SELECT pg_get_viewdef($1::oid)", oid).Scan(&def); err != nil {
			return "", fmt.Errorf("capture: definition of view %d: %w", oid, err)
		}
		if oid != view {
			b.WriteString("\x00" + names[oid] + "\x00")
		}
		b.WriteString(def)
	}
	return b.String(), nil
}

func mapKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// loadColumns describes the view's result: names, types, origins (kept for mapTable) and
// the key columns' indexes.
func (d *ViewDeps) loadColumns(ctx context.Context, tx pgx.Tx, v ViewSpec) error {
	sd, err := tx.Prepare(ctx, "", "SELECT * FROM ("+v.SQL+") AS _sc")
	if err != nil {
		return fmt.Errorf("%w: view %q: %w", ErrAnalyze, v.Name, err)
	}
	for i, f := range sd.Fields {
		d.Columns = append(d.Columns, Column{Num: int16(i + 1), Name: f.Name, TypeOID: f.DataTypeOID})
	}
	for i := range d.Columns {
		c := &d.Columns[i]
		if err := tx.QueryRow(ctx, "SELECT typarray, format_type(oid, NULL), typtype = 'e' FROM pg_type WHERE oid = $1", c.TypeOID).
			Scan(&c.ArrayOID, &c.TypeName, &c.Enum); err != nil {
			return fmt.Errorf("%w: view %q: type of column %q: %w", ErrAnalyze, v.Name, c.Name, err)
		}
	}
	for _, k := range v.Key {
		i := d.column(k)
		if i < 0 {
			return fmt.Errorf("%w: view %q: key column %q is not in the result", ErrAnalyze, v.Name, k)
		}
		d.Key = append(d.Key, i)
	}
	return nil
}

func (d *ViewDeps) column(name string) int {
	for i, c := range d.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// baseTables lists the tables a view's rewrite rule depends on, through other views.
// Materialized views and foreign tables are refused: logical replication does not carry
// their changes.
func baseTables(ctx context.Context, tx pgx.Tx, view, viewName string) ([]uint32, error) {
	const q = `
WITH RECURSIVE deps(oid) AS (
	SELECT $1::regclass::oid
	UNION
	SELECT d.refobjid
	FROM deps JOIN pg_rewrite r ON r.ev_class = deps.oid
	JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
	WHERE d.refobjid <> deps.oid
)
SELECT c.oid, c.relkind::text, format('%I.%I', n.nspname, c.relname)
FROM deps JOIN pg_class c ON c.oid = deps.oid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE deps.oid <> $1::regclass::oid ORDER BY 1`
	rows, err := tx.Query(ctx, q, view)
	if err != nil {
		return nil, fmt.Errorf("%w: view %q: dependencies: %w", ErrAnalyze, viewName, err)
	}
	defer rows.Close()
	var oids []uint32
	for rows.Next() {
		var oid uint32
		var kind, qname string
		if err := rows.Scan(&oid, &kind, &qname); err != nil {
			return nil, err
		}
		switch kind {
		case "r", "p":
			oids = append(oids, oid)
		case "v":
			// a view: its own dependencies are in the recursion
		case "m":
			return nil, fmt.Errorf("%w: view %q reads materialized view %s, whose refreshes logical replication does not carry (read its tables instead, or use capture: poll)", ErrAnalyze, viewName, qname)
		case "f":
			return nil, fmt.Errorf("%w: view %q reads foreign table %s, whose changes logical replication does not carry (use capture: poll)", ErrAnalyze, viewName, qname)
		}
	}
	return oids, rows.Err()
}

// loadTable reads a table's name and replica identity. A table without an identity
// (REPLICA IDENTITY NOTHING, or DEFAULT without a primary key) is refused: its updates and
// deletes cannot be told apart.
func loadTable(ctx context.Context, tx pgx.Tx, oid uint32, viewName string) (*Table, error) {
	t := &Table{OID: oid}
	var ident string
	var kind string
	if err := tx.QueryRow(ctx, `SELECT n.nspname, c.relname, c.relreplident::text, c.relkind::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, oid).Scan(&t.Schema, &t.Name, &ident, &kind); err != nil {
		return nil, fmt.Errorf("%w: view %q: table %d: %w", ErrAnalyze, viewName, oid, err)
	}
	t.ReplIdent = ident[0]
	t.Partitioned = kind == "p"
	if t.ReplIdent == 'n' {
		return nil, fmt.Errorf("%w: view %q reads table %s, which has REPLICA IDENTITY NOTHING: its updates and deletes carry no key (ALTER TABLE %s REPLICA IDENTITY DEFAULT with a primary key, or FULL; or use capture: poll)",
			ErrAnalyze, viewName, t, t.QualifiedName())
	}
	// The columns pgoutput sends in old tuples: the primary key (DEFAULT), the replica
	// identity index (INDEX), every column (FULL; the primary key then still identifies a
	// row, when there is one).
	cond := "i.indisprimary"
	if t.ReplIdent == 'i' {
		cond = "i.indisreplident"
	}
	rows, err := tx.Query(ctx, `
SELECT i.indexrelid, a.attnum, a.attname, a.atttypid
FROM pg_index i
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = $1 AND `+cond+`
ORDER BY i.indexrelid, k.ord`, oid)
	if err != nil {
		return nil, err
	}
	var first uint32
	for rows.Next() {
		var idx uint32
		var c Column
		if err := rows.Scan(&idx, &c.Num, &c.Name, &c.TypeOID); err != nil {
			rows.Close()
			return nil, err
		}
		if first == 0 {
			first = idx
		}
		if idx == first {
			t.Identity = append(t.Identity, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	all, err := allColumns(ctx, tx, oid)
	if err != nil {
		return nil, err
	}
	t.Columns = map[int16]Column{}
	for _, c := range all {
		t.Columns[c.Num] = c
	}
	if len(t.Identity) == 0 {
		if t.ReplIdent != 'f' {
			return nil, fmt.Errorf("%w: view %q reads table %s, which has no primary key and REPLICA IDENTITY DEFAULT: its updates and deletes carry no key (add a primary key, or ALTER TABLE %s REPLICA IDENTITY FULL; or use capture: poll)",
				ErrAnalyze, viewName, t, t.QualifiedName())
		}
		t.Identity = all
	}
	return t, nil
}

func allColumns(ctx context.Context, tx pgx.Tx, oid uint32) ([]Column, error) {
	rows, err := tx.Query(ctx, `SELECT a.attnum, a.attname, a.atttypid, t.typarray, format_type(a.atttypid, NULL) FROM pg_attribute a
		JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		err := r.Scan(&c.Num, &c.Name, &c.TypeOID, &c.ArrayOID, &c.TypeName)
		return c, err
	})
}

// applyHints maps the tables of v.Depends that the analysis left unmapped by the
// declared output columns, which hold the table's identity. The rows that lose a
// declared identity are re-read by key, as for a weak mapping.
func (d *ViewDeps) applyHints(ctx context.Context, tx pgx.Tx, v ViewSpec) error {
	for _, name := range mapKeys(v.Depends) {
		var oid uint32
		if err := tx.QueryRow(ctx, "SELECT $1::regclass::oid", name).Scan(&oid); err != nil {
			return fmt.Errorf("%w: view %q: depends: table %q: %w", ErrAnalyze, v.Name, name, err)
		}
		t := d.Table(oid)
		cols := v.Depends[name]
		if len(cols) != len(t.Identity) {
			return fmt.Errorf("%w: view %q: depends: %s has %d identity column(s) (%s), %d given", ErrAnalyze, v.Name, t, len(t.Identity), identityNames(t), len(cols))
		}
		m := &Mapping{Table: t, Occurrence: t.String(), Hinted: true, TableCols: t.Identity}
		for i, c := range cols {
			j := d.column(c)
			if j < 0 {
				return fmt.Errorf("%w: view %q: depends: %s: column %q is not in the result", ErrAnalyze, v.Name, t, c)
			}
			if d.Columns[j].TypeOID != t.Identity[i].TypeOID {
				return fmt.Errorf("%w: view %q: depends: %s: column %q (type %d) does not have the type of %s.%s (type %d)", ErrAnalyze, v.Name, t, c, d.Columns[j].TypeOID, t, t.Identity[i].Name, t.Identity[i].TypeOID)
			}
			m.Cols = append(m.Cols, j)
		}
		m.IsKey = sameSet(m.Cols, d.Key)
		if d.Maps[oid] != nil || d.structural[oid] {
			continue // the query itself maps it, or no mapping can
		}
		d.Maps[oid] = []*Mapping{m}
		delete(d.Unmapped, oid)
	}
	return nil
}

// sameSet reports whether a and b hold the same columns, in any order: a table whose
// identity is the view's key, even in another column order.
func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func identityNames(t *Table) string {
	n := make([]string, len(t.Identity))
	for i, c := range t.Identity {
		n[i] = c.Name
	}
	return strings.Join(n, ", ")
}
