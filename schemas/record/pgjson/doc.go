// Package pgjson turns PostgreSQL result rows into statecast record values and keys, as
// schemas/README.md fixes them: one JSON object per row, members in the query's column
// order, with the README's type table (numeric as an exact decimal string, timestamptz as
// RFC 3339 UTC, bytea as base64, json/jsonb embedded, arrays nested, ...), and the key text
// of chosen key columns.
//
// It works on the raw BINARY result values (pgx.Rows.RawValues) rather than on values
// decoded by pgx: that keeps numeric's display scale ("12.3400"), json's exact text and
// the encoding free of per-value allocations. Every query whose rows are encoded must
// therefore ask for binary results by passing ResultFormats as its first argument:
//
//	sd, _ := conn.Prepare(ctx, "", sql)               // or any FieldDescriptions
//	enc, err := pgjson.Compile(ctx, conn, sd.Fields, []string{"id"})
//	rows, _ := conn.Query(ctx, sql, pgjson.ResultFormats)
//	for rows.Next() {
//	    key, _ = enc.AppendKey(key[:0], "events", rows.RawValues())
//	    val, _ = enc.AppendValue(val[:0], rows.RawValues())
//	}
//
// Types without a mapping are refused by Compile/NewEncoder with a *TypeError naming the
// column and the type. Concurrency: an Encoder is immutable after construction and safe
// for concurrent use; the Append methods only write to the dst they are given.
//
// Files: encoder.go (Encoder: Compile, NewEncoder, the Append methods, ResultFormats),
// types.go (the type table, TypeInfo, LookupTypes for enums, citext and arrays of
// them), scalar.go (the scalar types' encoders), numeric.go, interval.go and array.go
// (numeric, interval and arrays), jsonstr.go (JSON string escaping), minlen.go
// (MinValueLen, MinKeyLen: a lower bound of a row's encoded size from the raw values'
// lengths, so that an oversized row is refused before it is encoded), errors.go (TypeError, the
// sentinels).
package pgjson
