package pgjson

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// FuzzMinLen: for any type and any binary value the encoder accepts, MinValueLen and
// MinKeyLen never exceed the lengths AppendValue and AppendKey write (they are the bounds
// a size limit is checked against before encoding).
func FuzzMinLen(f *testing.F) {
	f.Add(uint32(pgtype.TextOID), []byte("a\"b\\c\x00é"), false)
	f.Add(uint32(pgtype.ByteaOID), []byte{0, 1, 2, 3, 4}, false)
	f.Add(uint32(pgtype.JSONBOID), []byte("\x01{}"), true)
	f.Add(uint32(pgtype.JSONOID), []byte(`"x"`), true)
	f.Add(uint32(pgtype.Int4ArrayOID), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7, 0, 0, 0, 4, 0, 0, 0, 8}, false)
	f.Add(uint32(pgtype.TextArrayOID), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}, false)
	f.Add(uint32(pgtype.NumericOID), []byte{0, 1, 0, 0, 0, 0, 0, 2, 0, 12}, true)
	var oids []uint32
	for oid := range scalars {
		oids = append(oids, oid)
	}
	for oid := range arrays {
		oids = append(oids, oid)
	}
	f.Fuzz(func(t *testing.T, oid uint32, src []byte, null bool) {
		if _, ok := resolve(oid, nil); !ok {
			oid = oids[int(oid%uint32(len(oids)))]
		}
		fields := []pgconn.FieldDescription{{Name: "k", DataTypeOID: oid}, {Name: "v", DataTypeOID: pgtype.Int4OID}}
		enc, err := NewEncoder(fields, nil, []string{"k"})
		if err != nil {
			t.Fatal(err)
		}
		row := [][]byte{src, {0, 0, 0, 1}}
		if null {
			row[1] = nil
		}
		if v, err := enc.AppendValue(nil, row); err == nil {
			if m := enc.MinValueLen(row); m > len(v) {
				t.Fatalf("oid %d: MinValueLen %d > %d (%s)", oid, m, len(v), v)
			}
		}
		if k, err := enc.AppendKey(nil, "view", row); err == nil {
			if m := enc.MinKeyLen("view", row); m > len(k) {
				t.Fatalf("oid %d: MinKeyLen %d > %d (%q)", oid, m, len(k), k)
			}
		}
	})
}

// TestMinLenBoundsHugeValues: the bounds of a large text, bytea or array are close to its
// size, so a limit refuses it without encoding it.
func TestMinLenBoundsHugeValues(t *testing.T) {
	const n = 1 << 20
	for _, tc := range []struct {
		oid  uint32
		src  []byte
		want int // MinValueLen at least
	}{
		{pgtype.TextOID, make([]byte, n), n},
		{pgtype.ByteaOID, make([]byte, n), n},
		{pgtype.JSONBOID, append([]byte{1}, make([]byte, n)...), n},
		{pgtype.TextArrayOID, textArray(n / 8), n / 8},
	} {
		enc, err := NewEncoder([]pgconn.FieldDescription{{Name: "v", DataTypeOID: tc.oid}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := enc.MinValueLen([][]byte{tc.src}); m < tc.want {
			t.Errorf("oid %d of %d bytes: MinValueLen %d, want >= %d", tc.oid, len(tc.src), m, tc.want)
		}
	}
}

// textArray is the binary one-dimensional text[] of n empty strings.
func textArray(n int) []byte {
	b := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25}
	b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, 1)
	for range n {
		b = append(b, 0, 0, 0, 0)
	}
	return b
}
