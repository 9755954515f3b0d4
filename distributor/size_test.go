package distributor

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/statecast/statecast/schemas/record/pgjson"
)

// TestEncodeRefusesOversizedRowBeforeEncoding: a row whose value cannot fit the record
// size limit (a 64 MiB text against a 1 MiB limit) is refused with a *ViewError naming the
// key and the limit before it is encoded: the refusal allocates nothing near its size.
// A row that fits is encoded as before.
func TestEncodeRefusesOversizedRowBeforeEncoding(t *testing.T) {
	fields := []pgconn.FieldDescription{{Name: "id", DataTypeOID: pgtype.TextOID}, {Name: "v", DataTypeOID: pgtype.TextOID}}
	enc, err := pgjson.NewEncoder(fields, nil, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	v := &ViewConfig{Name: "big", Key: []string{"id"}}
	const limit = 1 << 20
	c := newRowCodec(v, enc, limit, headerBytes(v.Name)+recordOverhead)

	huge := [][]byte{[]byte("k1"), []byte(strings.Repeat("x", 64<<20))}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = c.encode(huge)
	runtime.ReadMemStats(&after)
	var ve *ViewError
	if !errors.As(err, &ve) || ve.Key != "big|k1" || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("encode of a 64 MiB row: %v, want a *ViewError for key big|k1 naming the limit", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("refusing the row allocated %d bytes: it was encoded first", alloc)
	}

	hugeKey := [][]byte{[]byte(strings.Repeat("k", 8<<20)), []byte("v")}
	if _, _, err := c.encode(hugeKey); !errors.As(err, &ve) || len(ve.Key) > 1024 {
		t.Fatalf("encode of an 8 MiB key: %v (key in the error: %d bytes)", err, len(ve.Key))
	}

	key, value, err := c.encode([][]byte{[]byte("k2"), []byte("small")})
	if err != nil || key != "big|k2" || string(value) != `{"id":"k2","v":"small"}` {
		t.Fatalf("encode of a small row: %q %s %v", key, value, err)
	}
}
