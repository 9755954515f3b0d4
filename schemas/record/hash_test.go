package record

import (
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestRowHash(t *testing.T) {
	want := xxhash.Sum64([]byte("events|1\x00{\"id\":1}"))
	if got := RowHash([]byte("events|1"), []byte(`{"id":1}`)); got != want {
		t.Fatalf("RowHash = %x, want %x", got, want)
	}
	// The separator keeps (key, value) pairs apart.
	if RowHash([]byte("ab"), []byte("c")) == RowHash([]byte("a"), []byte("bc")) {
		t.Fatal("RowHash ignores the key/value boundary")
	}
}

func TestEpochHashOrderIndependent(t *testing.T) {
	hs := []uint64{RowHash([]byte("v|1"), []byte("a")), RowHash([]byte("v|2"), []byte("b")), ^uint64(0), 1}
	var a, b EpochHash
	for _, h := range hs {
		a.Add(h)
	}
	for i := len(hs) - 1; i >= 0; i-- {
		b.Add(hs[i])
	}
	if a.Sum() != b.Sum() || a.Rows() != 4 {
		t.Fatalf("sums %x %x rows %d", a.Sum(), b.Sum(), a.Rows())
	}
	a.Remove(hs[0])
	a.Replace(hs[1], 42)
	var c EpochHash
	c.Add(42)
	c.Add(hs[2])
	c.Add(hs[3])
	if a.Sum() != c.Sum() || a.Rows() != c.Rows() {
		t.Fatalf("after remove/replace %x/%d, want %x/%d", a.Sum(), a.Rows(), c.Sum(), c.Rows())
	}
	var empty EpochHash
	if empty.Sum() != 0 || FormatHash(0) != "0000000000000000" || FormatHash(^uint64(0)) != "ffffffffffffffff" {
		t.Fatal("empty hash / FormatHash")
	}
	if h, err := ParseHash(FormatHash(0xabc)); err != nil || h != 0xabc {
		t.Fatalf("ParseHash = %x, %v", h, err)
	}
}

func TestRowHashPrefixed(t *testing.T) {
	for _, tt := range []struct{ view, key, value string }{
		{"events", "1", `{"id":1}`}, {"a|b", `x\|y`, ""}, {"v", "", "z"},
	} {
		prefix := KeyPrefix(tt.view)
		want := RowHash(append(KeyPrefix(tt.view), tt.key...), []byte(tt.value))
		if got := RowHashPrefixed(prefix, tt.key, []byte(tt.value)); got != want {
			t.Errorf("RowHashPrefixed(%q, %q, %q) = %x, want RowHash of the record key %x", prefix, tt.key, tt.value, got, want)
		}
	}
	prefix, value := KeyPrefix("events"), []byte(`{"id":1}`)
	if n := testing.AllocsPerRun(10, func() { RowHashPrefixed(prefix, "1", value); RowHash(prefix, value) }); n != 0 {
		t.Errorf("%v allocations per row hash", n)
	}
}

// FuzzRowHashPrefixed: hashing the prefix, key and value apart is hashing the record key.
func FuzzRowHashPrefixed(f *testing.F) {
	f.Add([]byte("events|"), "1", []byte(`{"id":1}`))
	f.Fuzz(func(t *testing.T, prefix []byte, key string, value []byte) {
		if got, want := RowHashPrefixed(prefix, key, value), RowHash(append(append([]byte{}, prefix...), key...), value); got != want {
			t.Fatalf("RowHashPrefixed = %x, RowHash = %x", got, want)
		}
	})
}

func TestShard(t *testing.T) {
	// Fixed values: the shard of a key is part of the format (another client computes it).
	key := EncodeKey("orders", "42")
	if got, want := Shard(key, 1<<32-1), uint32(xxhash.Sum64(key)%(1<<32-1)); got != want {
		t.Fatalf("Shard = %d, want %d", got, want)
	}
	if a, b := Shard([]byte("orders|42"), 16), Shard([]byte("orders|42"), 1000); a != 7 || b != 71 {
		t.Fatalf(`Shard("orders|42") = %d of 16, %d of 1000; the format says 7 and 71`, a, b)
	}
	counts := make([]int, 16)
	for i := range 16000 {
		k := EncodeKey("orders", strconv.Itoa(i))
		s := Shard(k, 16)
		if s != ShardString(string(k), 16) {
			t.Fatalf("Shard and ShardString differ on %q", k)
		}
		counts[s]++
	}
	for i, c := range counts {
		if c < 900 || c > 1100 {
			t.Fatalf("shard %d holds %d of 16000 keys, want about 1000 (%v)", i, c, counts)
		}
	}
}
