package record

import (
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
