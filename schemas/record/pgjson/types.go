package pgjson

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// TypeInfo describes a type that is not built into the mapping table, as read from
// pg_type by LookupTypes.
type TypeInfo struct {
	OID  uint32
	Name string // pg_type.typname
	Type byte   // pg_type.typtype: 'b' base, 'e' enum, 'c' composite, 'd' domain, ...
	Elem uint32 // element type when the type is an array, else 0
}

type scalarType struct {
	name     string
	fn       appendFunc
	isString bool // key text is the raw value (JSON string without quotes/escapes)
}

// scalars is the README's type table for built-in types.
var scalars = map[uint32]scalarType{
	pgtype.BoolOID:        {"boolean", appendBool, false},
	pgtype.Int2OID:        {"smallint", appendInt2, false},
	pgtype.Int4OID:        {"integer", appendInt4, false},
	pgtype.Int8OID:        {"bigint", appendInt8, false},
	pgtype.NumericOID:     {"numeric", appendNumeric, false},
	pgtype.Float4OID:      {"real", appendFloat4, false},
	pgtype.Float8OID:      {"double precision", appendFloat8, false},
	pgtype.TextOID:        {"text", appendText, true},
	pgtype.VarcharOID:     {"character varying", appendText, true},
	pgtype.BPCharOID:      {"character", appendText, true},
	pgtype.NameOID:        {"name", appendText, true},
	pgtype.QCharOID:       {`"char"`, appendQChar, true},
	pgtype.UUIDOID:        {"uuid", appendUUID, false},
	pgtype.TimestamptzOID: {"timestamp with time zone", appendTimestamptz, false},
	pgtype.TimestampOID:   {"timestamp without time zone", appendTimestamp, false},
	pgtype.DateOID:        {"date", appendDate, false},
	pgtype.TimeOID:        {"time without time zone", appendTime, false},
	pgtype.IntervalOID:    {"interval", appendInterval, false},
	pgtype.ByteaOID:       {"bytea", appendBytea, false},
	pgtype.JSONOID:        {"json", appendJSON, false},
	pgtype.JSONBOID:       {"jsonb", appendJSONB, false},
}

// arrays maps built-in array types to their element types.
var arrays = map[uint32]uint32{
	pgtype.BoolArrayOID:        pgtype.BoolOID,
	pgtype.Int2ArrayOID:        pgtype.Int2OID,
	pgtype.Int4ArrayOID:        pgtype.Int4OID,
	pgtype.Int8ArrayOID:        pgtype.Int8OID,
	pgtype.NumericArrayOID:     pgtype.NumericOID,
	pgtype.Float4ArrayOID:      pgtype.Float4OID,
	pgtype.Float8ArrayOID:      pgtype.Float8OID,
	pgtype.TextArrayOID:        pgtype.TextOID,
	pgtype.VarcharArrayOID:     pgtype.VarcharOID,
	pgtype.BPCharArrayOID:      pgtype.BPCharOID,
	pgtype.NameArrayOID:        pgtype.NameOID,
	pgtype.QCharArrayOID:       pgtype.QCharOID,
	pgtype.UUIDArrayOID:        pgtype.UUIDOID,
	pgtype.TimestamptzArrayOID: pgtype.TimestamptzOID,
	pgtype.TimestampArrayOID:   pgtype.TimestampOID,
	pgtype.DateArrayOID:        pgtype.DateOID,
	pgtype.TimeArrayOID:        pgtype.TimeOID,
	pgtype.IntervalArrayOID:    pgtype.IntervalOID,
	pgtype.ByteaArrayOID:       pgtype.ByteaOID,
	pgtype.JSONArrayOID:        pgtype.JSONOID,
	pgtype.JSONBArrayOID:       pgtype.JSONBOID,
}

func builtin(oid uint32) bool {
	_, s := scalars[oid]
	_, a := arrays[oid]
	return s || a
}

// resolved is how one type is written.
type resolved struct {
	name     string
	fn       appendFunc
	isString bool
}

// resolve finds the appender of a type; ok is false when the type has no mapping.
func resolve(oid uint32, types map[uint32]TypeInfo) (r resolved, ok bool) {
	if s, ok := scalars[oid]; ok {
		return resolved(s), true
	}
	if elem, ok := arrays[oid]; ok {
		s := scalars[elem]
		return resolved{s.name + "[]", arrayAppender(s.fn), false}, true
	}
	info, known := types[oid]
	if !known {
		return resolved{name: "oid " + strconv.FormatUint(uint64(oid), 10)}, false
	}
	if info.Elem != 0 {
		e, ok := resolve(info.Elem, types)
		if !ok || e.isArray() {
			return resolved{name: info.Name}, false
		}
		return resolved{name: e.name + "[]", fn: arrayAppender(e.fn)}, true
	}
	// Enums and citext travel as their UTF-8 text in binary format too.
	if info.Type == 'e' || info.Name == "citext" {
		return resolved{info.Name, appendText, true}, true
	}
	return resolved{name: info.Name}, false
}

func (r resolved) isArray() bool { return len(r.name) > 2 && r.name[len(r.name)-2:] == "[]" }

// Querier runs a query; *pgx.Conn, pgx.Tx and *pgxpool.Pool satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LookupTypes reads from pg_type the types (and array element types) among oids that are
// not built into the mapping table, so NewEncoder can accept enums, citext and arrays of
// them, and name refused types in its errors.
func LookupTypes(ctx context.Context, q Querier, oids []uint32) (map[uint32]TypeInfo, error) {
	var want []uint32
	for _, oid := range oids {
		if !builtin(oid) {
			want = append(want, oid)
		}
	}
	types := map[uint32]TypeInfo{}
	for len(want) > 0 {
		rows, err := q.Query(ctx, `SELECT t.oid, t.typname::text, t.typtype::text,
			CASE WHEN t.typcategory = 'A' THEN t.typelem ELSE 0 END
			FROM pg_catalog.pg_type t WHERE t.oid = ANY($1::oid[])`, want)
		if err != nil {
			return nil, fmt.Errorf("pgjson: look up column types: %w", err)
		}
		var next []uint32
		for rows.Next() {
			var info TypeInfo
			var typ string
			if err := rows.Scan(&info.OID, &info.Name, &typ, &info.Elem); err != nil {
				rows.Close()
				return nil, fmt.Errorf("pgjson: look up column types: %w", err)
			}
			if typ != "" {
				info.Type = typ[0]
			}
			types[info.OID] = info
			if info.Elem != 0 && !builtin(info.Elem) {
				if _, seen := types[info.Elem]; !seen {
					next = append(next, info.Elem)
				}
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("pgjson: look up column types: %w", err)
		}
		want = next
	}
	return types, nil
}
