package pgjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

func TestAppendString(t *testing.T) {
	tests := map[string]string{
		"":             `""`,
		"plain":        `"plain"`,
		"q\"b\\":       `"q\"b\\"`,
		"\n\r\t\b\f":   `"\n\r\t\b\f"`,
		"\x00\x1f":     `"\u0000\u001f"`,
		"é✓😀<>&":       `"é✓😀<>&"`,
		"\u2028\u2029": `"\u2028\u2029"`,
		"bad\xffutf8":  `"bad` + "\ufffd" + `utf8"`,
	}
	for in, want := range tests {
		if got := string(appendString(nil, in)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", in, got, want)
		}
		if got := string(appendString(nil, []byte(in))); got != want {
			t.Errorf("appendString([]byte %q) = %s, want %s", in, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff\xfe", "\u2028", "😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("invalid JSON %q for %q: %v", b, s, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip %q -> %q", s, back)
		}
	})
}

// FuzzDecoders feeds arbitrary bytes to every binary decoder: none may panic, and what
// they accept must be valid JSON.
func FuzzDecoders(f *testing.F) {
	f.Add(uint32(pgtype.NumericOID), []byte{0, 1, 0, 0, 0, 0, 0, 2, 0, 12})
	f.Add(uint32(pgtype.Int4ArrayOID), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7})
	f.Add(uint32(pgtype.IntervalOID), make([]byte, 16))
	f.Add(uint32(pgtype.TimestamptzOID), make([]byte, 8))
	f.Add(uint32(pgtype.JSONBOID), []byte("\x01{}"))
	var oids []uint32
	for oid := range scalars {
		oids = append(oids, oid)
	}
	for oid := range arrays {
		oids = append(oids, oid)
	}
	f.Fuzz(func(t *testing.T, oid uint32, src []byte) {
		r, ok := resolve(oid, nil)
		if !ok {
			r, _ = resolve(oids[int(oid%uint32(len(oids)))], nil)
		}
		out, err := r.fn(nil, src)
		if err != nil {
			if !errors.Is(err, ErrBadData) {
				t.Fatalf("%s: error without ErrBadData: %v", r.name, err)
			}
			return
		}
		// json/jsonb embed the server's text unchecked: the server validated it.
		if strings.Contains(r.name, "json") {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s: invalid JSON %q from %x", r.name, out, src)
		}
	})
}

func BenchmarkAppendValue(b *testing.B) {
	fields := []pgconn.FieldDescription{
		{Name: "id", DataTypeOID: pgtype.Int8OID}, {Name: "name", DataTypeOID: pgtype.TextOID},
		{Name: "price", DataTypeOID: pgtype.NumericOID}, {Name: "updated_at", DataTypeOID: pgtype.TimestamptzOID},
		{Name: "active", DataTypeOID: pgtype.BoolOID}, {Name: "note", DataTypeOID: pgtype.TextOID},
	}
	enc, err := NewEncoder(fields, nil, []string{"id"})
	if err != nil {
		b.Fatal(err)
	}
	row := [][]byte{
		{0, 0, 0, 0, 0, 1, 0xe2, 0x40},
		[]byte("Manchester United v Liverpool — Match Odds"),
		{0, 2, 0, 0, 0, 0, 0, 2, 0, 3, 0x0f, 0xa0}, // 3.4000
		{0, 2, 0xf0, 0x5b, 0x27, 0x5a, 0x30, 0x00},
		{1},
		nil,
	}
	var k, v []byte
	b.ReportAllocs()
	for b.Loop() {
		k, _ = enc.AppendKey(k[:0], "events", row)
		v, err = enc.AppendValue(v[:0], row)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(k) + len(v)))
}
