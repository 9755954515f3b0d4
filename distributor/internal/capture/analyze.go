package capture

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
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
	// Filled for a view's output columns: the type's array type, its SQL name
	// (format_type) and whether it is an enum.
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

	printed string // the name as PostgreSQL prints it qualified: format('%I.%I')
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

// Mapping says how a change of Table reaches the view: the rows to re-read are those whose
// output columns Cols hold the changed row's identity (old or new).
type Mapping struct {
	Table *Table
	Cols  []int // output column indexes, one per Table.Identity column, in that order
	// IsKey: Cols are the view's key columns (in any order): a changed identity is a view
	// key.
	IsKey bool
	// Hinted: declared in ViewSpec.Depends rather than found from the column origins.
	Hinted bool
}

// ViewDeps is how a view depends on its base tables.
type ViewDeps struct {
	View   string
	Tables []*Table // every base table, sorted by name
	// Maps holds the mapped tables by OID; a table absent from it is unmapped: any change
	// of it re-reads the whole view. Unmapped[oid] says why.
	Maps     map[uint32]*Mapping
	Unmapped map[uint32]string
	// Shape, when set, is why no table of the view can be mapped (a query feature under
	// which a changed base row can change view rows that do not hold its identity).
	Shape string
	// Columns are the view's output columns (name, type) and Key the indexes of its key
	// columns.
	Columns []Column
	Key     []int

	origins []origin // per output column: the table column it is a plain copy of, if any
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
// validate prints it).
func (d *ViewDeps) Describe() []string {
	var out []string
	for _, t := range d.Tables {
		m := d.Maps[t.OID]
		switch {
		case m == nil:
			out = append(out, fmt.Sprintf("%s: full re-read of the view on every change (%s)", t, d.Unmapped[t.OID]))
		case m.IsKey:
			out = append(out, fmt.Sprintf("%s: by the view's key", t))
		default:
			names := make([]string, len(m.Cols))
			for i, c := range m.Cols {
				names[i] = d.Columns[c].Name
			}
			how := "selected"
			if m.Hinted {
				how = "declared in depends"
			}
			out = append(out, fmt.Sprintf("%s: by column(s) %s (%s)", t, strings.Join(names, ", "), how))
		}
	}
	return out
}

// ErrAnalyze wraps the errors of Analyze that name a view's unusable table or column.
var ErrAnalyze = errors.New("capture")

var tempSeq atomic.Int64

// Analyze finds the base tables of v and how each one's changes map to v's rows. It runs
// in tx (it creates and drops a temporary view; the caller may roll tx back).
func Analyze(ctx context.Context, tx pgx.Tx, v ViewSpec) (*ViewDeps, error) {
	name := fmt.Sprintf("statecast_analyze_%d", tempSeq.Add(1))
	if _, err := tx.Exec(ctx, "CREATE TEMPORARY VIEW "+name+" AS "+v.SQL); err != nil {
		return nil, fmt.Errorf("%w: view %q: its SQL cannot define a view: %w", ErrAnalyze, v.Name, err)
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "DROP VIEW IF EXISTS pg_temp."+name) }()
	d := &ViewDeps{View: v.Name, Maps: map[uint32]*Mapping{}, Unmapped: map[uint32]string{}}
	if err := d.loadColumns(ctx, tx, v); err != nil {
		return nil, err
	}
	oids, err := baseTables(ctx, tx, "pg_temp."+name, v.Name)
	if err != nil {
		return nil, err
	}
	for _, extra := range append(slices.Clone(v.Tables), mapKeys(v.Depends)...) {
		var oid uint32
		if err := tx.QueryRow(ctx, "SELECT $1::regclass::oid", extra).Scan(&oid); err != nil {
			return nil, fmt.Errorf("%w: view %q: table %q: %w", ErrAnalyze, v.Name, extra, err)
		}
		if !slices.Contains(oids, oid) {
			oids = append(oids, oid)
		}
	}
	for _, oid := range oids {
		t, err := loadTable(ctx, tx, oid, v.Name)
		if err != nil {
			return nil, err
		}
		d.Tables = append(d.Tables, t)
	}
	slices.SortFunc(d.Tables, func(a, b *Table) int { return strings.Compare(a.String(), b.String()) })
	if d.Shape, err = queryShape(ctx, tx, name); err != nil {
		return nil, err
	}
	refs, err := references(ctx, tx, name, d.Tables)
	if err != nil {
		return nil, err
	}
	for _, t := range d.Tables {
		d.mapTable(t, refs[t.OID])
	}
	return d, d.applyHints(ctx, tx, v)
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
	d.origins = make([]origin, len(sd.Fields))
	for i, f := range sd.Fields {
		d.Columns = append(d.Columns, Column{Num: int16(i + 1), Name: f.Name, TypeOID: f.DataTypeOID})
		d.origins[i] = origin{table: f.TableOID, att: int16(f.TableAttributeNumber)}
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

type origin struct {
	table uint32
	att   int16
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
	if err := tx.QueryRow(ctx, `SELECT n.nspname, c.relname, c.relreplident::text, c.relkind::text, format('%I.%I', n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, oid).Scan(&t.Schema, &t.Name, &ident, &kind, &t.printed); err != nil {
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
	if len(t.Identity) == 0 {
		if t.ReplIdent != 'f' {
			return nil, fmt.Errorf("%w: view %q reads table %s, which has no primary key and REPLICA IDENTITY DEFAULT: its updates and deletes carry no key (add a primary key, or ALTER TABLE %s REPLICA IDENTITY FULL; or use capture: poll)",
				ErrAnalyze, viewName, t, t.QualifiedName())
		}
		all, err := allColumns(ctx, tx, oid)
		if err != nil {
			return nil, err
		}
		t.Identity = all
	}
	return t, nil
}

func allColumns(ctx context.Context, tx pgx.Tx, oid uint32) ([]Column, error) {
	rows, err := tx.Query(ctx, `SELECT attnum, attname, atttypid FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		err := r.Scan(&c.Num, &c.Name, &c.TypeOID)
		return c, err
	})
}

// Query features under which a changed base row can change view rows that do not hold its
// identity (a rank, the chosen row of a DISTINCT ON group, a LIMIT's window, the other
// branch of a set operation): read from the parse tree PostgreSQL stored for the view.
var shapes = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`:hasWindowFuncs true`), "window functions"},
	{regexp.MustCompile(`:hasDistinctOn true`), "DISTINCT ON"},
	{regexp.MustCompile(`:limitCount [^<]`), "LIMIT"},
	{regexp.MustCompile(`:limitOffset [^<]`), "OFFSET"},
	{regexp.MustCompile(`:setOperations [^<]`), "a set operation (UNION, INTERSECT, EXCEPT)"},
	{regexp.MustCompile(`:hasRecursive true`), "a recursive query"},
}

func queryShape(ctx context.Context, tx pgx.Tx, view string) (string, error) {
	var tree string
	if err := tx.QueryRow(ctx, "SELECT ev_action::text FROM pg_rewrite WHERE ev_class = $1::regclass", "pg_temp."+view).Scan(&tree); err != nil {
		return "", err
	}
	var found []string
	for _, s := range shapes {
		if s.re.MatchString(tree) {
			found = append(found, s.why)
		}
	}
	return strings.Join(found, ", "), nil
}

// references counts how often each table is named in the view's definition as PostgreSQL
// prints it with every name schema-qualified. A table named twice (a self-join, or a
// subquery on it) cannot be mapped by one set of columns. The count may be too high (the
// name inside a string literal), never too low, so an error only costs a re-read.
func references(ctx context.Context, tx pgx.Tx, view string, tables []*Table) (map[uint32]int, error) {
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = ''"); err != nil {
		return nil, err
	}
	var def string
	err := tx.QueryRow(ctx, "SELECT pg_get_viewdef($1::regclass)", "pg_temp."+view).Scan(&def)
	if _, rerr := tx.Exec(ctx, "RESET search_path"); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	refs := map[uint32]int{}
	for _, t := range tables {
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_$"])` + regexp.QuoteMeta(t.printed) + `($|[^A-Za-z0-9_$"])`)
		refs[t.OID] = len(re.FindAllStringIndex(def, -1))
	}
	return refs, nil
}

// mapTable maps t through the output columns whose origin is t's identity columns.
func (d *ViewDeps) mapTable(t *Table, refs int) {
	switch {
	case d.Shape != "":
		d.Unmapped[t.OID] = "the query uses " + d.Shape
		return
	case refs > 1:
		d.Unmapped[t.OID] = fmt.Sprintf("the query names %s %d times", t, refs)
		return
	}
	cols := make([]int, 0, len(t.Identity))
	for _, ic := range t.Identity {
		j := slices.Index(d.origins, origin{table: t.OID, att: ic.Num})
		if j < 0 {
			d.Unmapped[t.OID] = fmt.Sprintf("no output column is %s.%s: select it, or declare the columns holding it in depends", t, ic.Name)
			return
		}
		cols = append(cols, j)
	}
	d.Maps[t.OID] = &Mapping{Table: t, Cols: cols, IsKey: sameSet(cols, d.Key)}
	delete(d.Unmapped, t.OID)
}

// applyHints maps the tables of v.Depends by the declared output columns.
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
		m := &Mapping{Table: t, Hinted: true}
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
		if d.Shape != "" {
			continue // a declared mapping cannot make such a query mappable
		}
		d.Maps[oid] = m
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
