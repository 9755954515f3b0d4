package chaos

import (
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/record"
)

// TestTapStale: a row record older than an earlier record of its key is stale, a key
// deleted and inserted again with a newer version is not, and the first and last stale
// records' read times are returned.
func TestTapStale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	row := string(record.KindRow)
	tp := &tap{recs: []tapRecord{
		{Index: 1, Key: "accounts|1", Kind: row, Value: []byte(`{"id":1,"v":10}`), At: t0},
		{Index: 2, Key: "accounts|1", Kind: row, Value: []byte(`{"id":1,"v":12}`), At: t0.Add(time.Second)},
		{Index: 3, Key: "accounts|1", Kind: row, At: t0.Add(2 * time.Second)}, // a tombstone
		{Index: 4, Key: "accounts|1", Kind: row, Value: []byte(`{"id":1,"v":20}`), At: t0.Add(3 * time.Second)},
		{Index: 5, Key: "items|7", Kind: row, Value: []byte(`{"id":7,"v":5,"cv":30}`), At: t0.Add(4 * time.Second)},
		{Index: 6, Key: "accounts|1", Kind: row, Value: []byte(`{"id":1,"v":11}`), At: t0.Add(5 * time.Second)},     // stale
		{Index: 7, Key: "items|7", Kind: row, Value: []byte(`{"id":7,"v":6,"cv":29}`), At: t0.Add(6 * time.Second)}, // stale: max(v, cv) went down
		{Index: 8, Key: "items|7", Kind: row, Value: []byte(`{"id":7,"v":31,"cv":29}`), At: t0.Add(7 * time.Second)},
	}}
	out, n, at := tp.stale(10)
	if n != 2 || len(out) != 2 {
		t.Fatalf("%d stale records %q, want 2", n, out)
	}
	if !at[0].Equal(t0.Add(5*time.Second)) || !at[1].Equal(t0.Add(6*time.Second)) {
		t.Errorf("read at %v, want the 6th and 7th records' times", at)
	}
	if _, n, _ := tp.stale(0); n != 2 {
		t.Errorf("with limit 0: %d, want 2 counted", n)
	}
}
