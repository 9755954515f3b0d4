package pgjson

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/schemas/record"
)

// ResultFormats asks for every result column in binary format. Pass it as the first
// argument of every Query whose rows an Encoder encodes.
var ResultFormats = pgx.QueryResultFormats{pgx.BinaryFormatCode}

// Column is one result column as the encoder writes it.
type Column struct {
	Name string
	OID  uint32
	Type string // type name used in errors ("numeric", "text[]", an enum's name, ...)

	fn       appendFunc
	isString bool
	prefix   []byte               // `"name":` (with the separating comma for all but the first column)
	minLen   func(src []byte) int // a lower bound of the JSON length of the binary value src (minlen.go)
}

// Encoder writes rows of one query shape. It is immutable and safe for concurrent use.
type Encoder struct {
	cols []Column
	keys []int // indexes of the key columns, in key order
}

// Compile looks up the types of fields that are not built in (LookupTypes) and returns
// NewEncoder(fields, types, keyColumns).
func Compile(ctx context.Context, q Querier, fields []pgconn.FieldDescription, keyColumns []string) (*Encoder, error) {
	oids := make([]uint32, len(fields))
	for i, f := range fields {
		oids[i] = f.DataTypeOID
	}
	types, err := LookupTypes(ctx, q, oids)
	if err != nil {
		return nil, err
	}
	return NewEncoder(fields, types, keyColumns)
}

// NewEncoder returns the encoder of rows with the given fields. types describes the
// non-built-in types (from LookupTypes; nil accepts built-in types only). It fails with a
// *TypeError for a column whose type has no mapping, ErrDuplicateColumn when two columns
// share a name, and ErrNoKeyColumn when a key column is missing. The format recorded in
// fields is ignored: rows must be fetched with ResultFormats.
func NewEncoder(fields []pgconn.FieldDescription, types map[uint32]TypeInfo, keyColumns []string) (*Encoder, error) {
	e := &Encoder{cols: make([]Column, len(fields))}
	index := make(map[string]int, len(fields))
	for i, f := range fields {
		if _, dup := index[f.Name]; dup {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateColumn, f.Name)
		}
		index[f.Name] = i
		r, ok := resolve(f.DataTypeOID, types)
		if !ok {
			return nil, &TypeError{Column: f.Name, Type: r.name}
		}
		var prefix []byte
		if i > 0 {
			prefix = append(prefix, ',')
		}
		prefix = appendString(prefix, f.Name)
		prefix = append(prefix, ':')
		e.cols[i] = Column{Name: f.Name, OID: f.DataTypeOID, Type: r.name, fn: r.fn, isString: r.isString, prefix: prefix,
			minLen: minLenOf(f.DataTypeOID, types)}
	}
	for _, k := range keyColumns {
		i, ok := index[k]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrNoKeyColumn, k)
		}
		e.keys = append(e.keys, i)
	}
	return e, nil
}

// Columns returns the result columns (read-only).
func (e *Encoder) Columns() []Column { return e.cols }

// ColumnIndex returns the index of the named column, or -1.
func (e *Encoder) ColumnIndex(name string) int {
	for i, c := range e.cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

func (e *Encoder) checkRow(row [][]byte) error {
	if len(row) != len(e.cols) {
		return fmt.Errorf("%w: row has %d values, the query %d columns", ErrBadData, len(row), len(e.cols))
	}
	return nil
}

// AppendValue appends the JSON object of a row (RawValues of a query run with
// ResultFormats) to dst.
func (e *Encoder) AppendValue(dst []byte, row [][]byte) ([]byte, error) {
	if err := e.checkRow(row); err != nil {
		return dst, err
	}
	dst = append(dst, '{')
	for i := range e.cols {
		c := &e.cols[i]
		dst = append(dst, c.prefix...)
		if row[i] == nil {
			dst = append(dst, "null"...)
			continue
		}
		var err error
		if dst, err = c.fn(dst, row[i]); err != nil {
			return dst, fmt.Errorf("column %q: %w", c.Name, err)
		}
	}
	return append(dst, '}'), nil
}

// AppendKeyText appends the key text of column col of row: its JSON value with strings
// unquoted. A NULL value is ErrNullKey.
func (e *Encoder) AppendKeyText(dst []byte, col int, row [][]byte) ([]byte, error) {
	if err := e.checkRow(row); err != nil {
		return dst, err
	}
	c := &e.cols[col]
	src := row[col]
	if src == nil {
		return dst, fmt.Errorf("%w: column %q", ErrNullKey, c.Name)
	}
	if c.isString {
		return append(dst, src...), nil
	}
	start := len(dst)
	dst, err := c.fn(dst, src)
	if err != nil {
		return dst, fmt.Errorf("column %q: %w", c.Name, err)
	}
	// Non-string types only quote escape-free text (numbers as strings, times, uuids,
	// base64): dropping the quotes is the unquoted string.
	if n := len(dst); n-start >= 2 && dst[start] == '"' {
		copy(dst[start:], dst[start+1:n-1])
		dst = dst[:n-2]
	}
	return dst, nil
}

// AppendKey appends the record key of row for view: record.EncodeKey(view, key texts...).
func (e *Encoder) AppendKey(dst []byte, view string, row [][]byte) ([]byte, error) {
	if err := e.checkRow(row); err != nil {
		return dst, err
	}
	dst = record.AppendEscaped(dst, view)
	for _, k := range e.keys {
		dst = append(dst, '|')
		if e.cols[k].isString {
			if row[k] == nil {
				return dst, fmt.Errorf("%w: column %q", ErrNullKey, e.cols[k].Name)
			}
			dst = record.AppendEscaped(dst, row[k])
			continue
		}
		start := len(dst)
		var err error
		if dst, err = e.AppendKeyText(dst, k, row); err != nil {
			return dst, err
		}
		// Numbers, times, uuids and base64 never need escaping; json and arrays may.
		if bytes.IndexByte(dst[start:], '|') >= 0 || bytes.IndexByte(dst[start:], '\\') >= 0 {
			text := bytes.Clone(dst[start:])
			dst = record.AppendEscaped(dst[:start], text)
		}
	}
	return dst, nil
}

// KeyParts returns the key texts of row's key columns, in key order.
func (e *Encoder) KeyParts(row [][]byte) ([]string, error) {
	parts := make([]string, len(e.keys))
	for i, k := range e.keys {
		b, err := e.AppendKeyText(nil, k, row)
		if err != nil {
			return nil, err
		}
		parts[i] = string(b)
	}
	return parts, nil
}
