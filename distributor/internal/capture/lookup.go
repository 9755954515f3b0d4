package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A Lookup reads the rows of a view whose given output columns hold one of a list of
// value tuples: SELECT * FROM (view) AS _sc WHERE (cols) IN (the tuples). PostgreSQL pushes
// the condition down into the view's query, so a lookup by a base table's identity reads
// through that table's index rather than the whole view.
type Lookup struct {
	sql    string
	params []uint32 // one array parameter per column: its array type
	elems  []uint32 // and its element type
	// each reads the rows of the tuples one tuple at a time in one statement (eachSQL, the
	// same parameters as sql); single is the lookup of one tuple (cols = $1 AND …, a
	// parameter per column of type elems), which Plan costs; view is the view's SQL.
	// perValue is up to how many tuples Run reads them one tuple at a time (Plan): 0, never.
	each     string
	single   string
	view     string
	perValue int
	eachID   string // identifies each on a connection (lookup_prepared.go)
	// cols are the view's columns the analysis found, which a lookup of view rows returns
	// (nil for a hop lookup): a result of other columns is ErrColumnsChanged.
	cols []Column
}

// ErrColumnsChanged: a lookup's result has other columns than the view had when it was
// analyzed (a `SELECT *` over a table that gained or lost a column, a column whose type
// changed). The view's analysis and encoder are out of date: analyze it again.
var ErrColumnsChanged = errors.New("capture: the view's result columns changed since its analysis")

// lookupChunk bounds the tuples of one statement.
const lookupChunk = 20000

// NewLookup builds the lookup of viewSQL's rows by the binary values of the output columns
// cols of d (a mapping's Cols, or the key).
func NewLookup(d *ViewDeps, viewSQL string, cols []int) (*Lookup, error) {
	l := &Lookup{cols: d.Columns}
	var unnest, names []string
	for i, c := range cols {
		col := d.Columns[c]
		if col.ArrayOID == 0 {
			return nil, fmt.Errorf("%w: view %q: column %q has a type without an array type", ErrAnalyze, d.View, col.Name)
		}
		l.params = append(l.params, col.ArrayOID)
		l.elems = append(l.elems, col.TypeOID)
		unnest = append(unnest, fmt.Sprintf("$%d", i+1))
		names = append(names, "_sc."+pgx.Identifier{col.Name}.Sanitize())
	}
	l.sql = lookupSQL(viewSQL, names, "unnest("+strings.Join(unnest, ", ")+")")
	l.single = singleSQL(viewSQL, names, func(i int) string { return fmt.Sprintf("$%d", i+1) })
	l.each = eachSQL(viewSQL, names, func(i int) string { return fmt.Sprintf("_k.u%d", i) })
	l.eachID = fmt.Sprintf("%s\x00%v", l.each, l.params)
	l.view = viewSQL
	return l, nil
}

// NewHopLookup builds the query of a mapping's hops: the values of the last hop's Out
// columns in the rows the joins reach from the values of the changed rows' column
// m.TableCols[0] (one value per tuple). It reads the tables, not the view: a change of
// a parent reaches the view's rows through the children that hold its key.
func NewHopLookup(m *Mapping) (*Lookup, error) {
	in := m.TableCols[0]
	if in.ArrayOID == 0 {
		return nil, fmt.Errorf("%w: table %s: column %q has a type without an array type", ErrAnalyze, m.Table, in.Name)
	}
	var from []string
	for i, h := range m.Hops {
		alias := fmt.Sprintf("_h%d", i)
		if i == 0 {
			from = append(from, h.Table.QualifiedName()+" AS "+alias)
			continue
		}
		prev := m.Hops[i-1]
		from = append(from, fmt.Sprintf("JOIN %s AS %s ON %s.%s = _h%d.%s", h.Table.QualifiedName(), alias,
			alias, pgx.Identifier{h.Match.Name}.Sanitize(), i-1, pgx.Identifier{prev.Out[0].Name}.Sanitize()))
	}
	last := len(m.Hops) - 1
	var out []string
	for _, c := range m.Hops[last].Out {
		out = append(out, fmt.Sprintf("_h%d.%s", last, pgx.Identifier{c.Name}.Sanitize()))
	}
	sql := fmt.Sprintf("SELECT DISTINCT %s FROM %s WHERE _h0.%s = ANY($1::%s[])", strings.Join(out, ", "), strings.Join(from, " "),
		pgx.Identifier{m.Hops[0].Match.Name}.Sanitize(), in.TypeName)
	return &Lookup{sql: sql, params: []uint32{in.ArrayOID}, elems: []uint32{in.TypeOID}}, nil
}

// SQL is the lookup's statement (for logs and tests).
func (l *Lookup) SQL() string { return l.sql }

// NewKeyLookup builds the lookup of viewSQL's rows by their key texts (as record keys hold
// them, see schemas/README.md), which PostgreSQL casts to the key columns' types. It fails
// for key types whose key text is not PostgreSQL's input syntax.
func NewKeyLookup(d *ViewDeps, viewSQL string) (*Lookup, error) {
	l := &Lookup{cols: d.Columns}
	var args, casts, names []string
	for i, c := range d.Key {
		col := d.Columns[c]
		arg := fmt.Sprintf("u%d", i)
		cast, ok := keyTextCast(col, arg)
		if !ok {
			return nil, fmt.Errorf("%w: view %q: key column %q has type %s, whose key text PostgreSQL cannot read back", ErrAnalyze, d.View, col.Name, col.TypeName)
		}
		l.params = append(l.params, pgtype.TextArrayOID)
		l.elems = append(l.elems, pgtype.TextOID)
		args = append(args, fmt.Sprintf("$%d", i+1))
		casts = append(casts, cast)
		names = append(names, "_sc."+pgx.Identifier{col.Name}.Sanitize())
	}
	from := fmt.Sprintf("(SELECT %s FROM unnest(%s) AS _k(%s))", strings.Join(casts, ", "), strings.Join(args, ", "), keyArgs(len(d.Key)))
	l.sql = lookupSQL(viewSQL, names, from)
	l.single = singleSQL(viewSQL, names, func(i int) string {
		cast, _ := keyTextCast(d.Columns[d.Key[i]], fmt.Sprintf("$%d", i+1))
		return cast
	})
	l.each = eachSQL(viewSQL, names, func(i int) string {
		cast, _ := keyTextCast(d.Columns[d.Key[i]], fmt.Sprintf("_k.u%d", i))
		return cast
	})
	l.eachID = fmt.Sprintf("%s\x00%v", l.each, l.params)
	l.view = viewSQL
	return l, nil
}

func keyArgs(n int) string {
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("u%d", i)
	}
	return strings.Join(a, ", ")
}

func lookupSQL(viewSQL string, names []string, from string) string {
	if len(names) == 1 {
		if strings.HasPrefix(from, "unnest(") {
			return fmt.Sprintf("SELECT * FROM (%s) AS _sc WHERE %s = ANY(%s)", viewSQL, names[0], strings.TrimSuffix(strings.TrimPrefix(from, "unnest("), ")"))
		}
		return fmt.Sprintf("SELECT * FROM (%s) AS _sc WHERE %s IN (SELECT * FROM %s AS _v)", viewSQL, names[0], from)
	}
	return fmt.Sprintf("SELECT * FROM (%s) AS _sc WHERE (%s) IN (SELECT * FROM %s AS _v)", viewSQL, strings.Join(names, ", "), from)
}

// keyTextCast returns the SQL that turns key text arg back into a value of col's type.
func keyTextCast(col Column, arg string) (string, bool) {
	switch col.TypeOID {
	case pgtype.ByteaOID:
		return "decode(" + arg + ", 'base64')", true
	case pgtype.BoolOID, pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.NumericOID,
		pgtype.Float4OID, pgtype.Float8OID, pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID,
		pgtype.NameOID, pgtype.UUIDOID, pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID,
		pgtype.TimeOID, pgtype.IntervalOID:
		return arg + "::" + col.TypeName, true
	}
	if col.Enum {
		return arg + "::" + col.TypeName, true
	}
	return "", false
}

// Run looks up tuples (each one value per column: binary values of the columns' types, or
// key texts for a key lookup) in tx and calls each with every row found (binary result
// values, valid until the next call). Tuples are sent in chunks.
func (l *Lookup) Run(ctx context.Context, tx pgx.Tx, tuples [][][]byte, each func(row [][]byte) error) error {
	conn := tx.Conn().PgConn()
	stmt := ""
	if len(tuples) <= l.perValue {
		var err error
		if stmt, err = l.prepareEach(ctx, conn); err != nil {
			return err
		}
	}
	formats := []int16{1}
	for len(tuples) > 0 {
		n := min(len(tuples), lookupChunk)
		chunk := tuples[:n]
		tuples = tuples[n:]
		params, pformats := l.arrays(chunk)
		var rr *pgconn.ResultReader
		if stmt != "" {
			rr = conn.ExecPrepared(ctx, stmt, params, pformats, formats)
		} else {
			rr = conn.ExecParams(ctx, l.sql, params, l.params, pformats, formats)
		}
		if err := l.checkColumns(rr.FieldDescriptions()); err != nil {
			_, _ = rr.Close()
			return err
		}
		for rr.NextRow() {
			if err := each(rr.Values()); err != nil {
				_, _ = rr.Close()
				return err
			}
		}
		if _, err := rr.Close(); err != nil {
			if stmt != "" {
				return l.preparedFailed(conn, err)
			}
			return err
		}
	}
	return nil
}

// encodeArray encodes column c of tuples as a one-dimensional array in PostgreSQL's binary
// format: ndim, has-null flag, element type, then the dimension (length, lower bound 1)
// and each element as a length (-1 for NULL) and its bytes.
func encodeArray(elem uint32, tuples [][][]byte, c int) []byte {
	size := 20
	hasNull := uint32(0)
	for _, t := range tuples {
		size += 4 + len(t[c])
		if t[c] == nil {
			hasNull = 1
		}
	}
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, hasNull)
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(len(tuples)))
	b = binary.BigEndian.AppendUint32(b, 1)
	for _, t := range tuples {
		if t[c] == nil {
			b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(t[c])))
		b = append(b, t[c]...)
	}
	return b
}

// eachSQL reads the rows of every tuple one tuple at a time, in one statement: the
// parameters' arrays are unnested (as _k(u0, u1, …)) and the view joined LATERAL with
// names[i] = value(i), AND-ed. OFFSET 0 keeps PostgreSQL from pulling the subquery up into
// a join with the unnested tuples: it plans the view once with the conditions as
// parameters, which it carries through the view's joins into aggregated, DISTINCT and
// windowed subqueries as it carries a constant, and runs that plan for each tuple.
func eachSQL(viewSQL string, names []string, value func(int) string) string {
	args := make([]string, len(names))
	conds := make([]string, len(names))
	for i, n := range names {
		args[i] = fmt.Sprintf("$%d", i+1)
		conds[i] = n + " = " + value(i)
	}
	return fmt.Sprintf("SELECT _sc.* FROM unnest(%s) AS _k(%s) CROSS JOIN LATERAL (SELECT * FROM (%s) AS _sc WHERE %s OFFSET 0) AS _sc",
		strings.Join(args, ", "), keyArgs(len(names)), viewSQL, strings.Join(conds, " AND "))
}

// singleSQL is the lookup of one tuple: names[i] = value(i), AND-ed.
func singleSQL(viewSQL string, names []string, value func(int) string) string {
	conds := make([]string, len(names))
	for i, n := range names {
		conds[i] = n + " = " + value(i)
	}
	return fmt.Sprintf("SELECT * FROM (%s) AS _sc WHERE %s", viewSQL, strings.Join(conds, " AND "))
}

// checkColumns compares a result's columns with the analyzed ones.
func (l *Lookup) checkColumns(fields []pgconn.FieldDescription) error {
	if l.cols == nil || fields == nil {
		return nil // a hop lookup, or a statement that failed (Close reports it)
	}
	if len(fields) != len(l.cols) {
		return fmt.Errorf("%w: %d columns, %d at the analysis", ErrColumnsChanged, len(fields), len(l.cols))
	}
	for i, f := range fields {
		if c := l.cols[i]; f.Name != c.Name || f.DataTypeOID != c.TypeOID {
			return fmt.Errorf("%w: column %d is %q (type %d), %q (type %d) at the analysis", ErrColumnsChanged, i+1, f.Name, f.DataTypeOID, c.Name, c.TypeOID)
		}
	}
	return nil
}
