package checker

import (
	"encoding/json"
	"slices"
	"testing"
)

// selTopic: view a, rows {"v": n}; a row passes the selection when v >= 5. Key k1 moves out
// at 2, k2 moves in at 3, k3 is created at 5 and deleted at 6.
var selTopic = []Record{
	{Index: 0, Key: "a|k1", View: "a", Kind: KindRow, Value: []byte(`{"v":7}`)},
	{Index: 1, Key: "a|k2", View: "a", Kind: KindRow, Value: []byte(`{"v":1}`)},
	{Index: 2, Key: "a|k1", View: "a", Kind: KindRow, Value: []byte(`{"v":2}`)},
	{Index: 3, Key: "a|k2", View: "a", Kind: KindRow, Value: []byte(`{"v":9}`)},
	{Index: 4, Key: "!ctl|position", Kind: KindPosition, Value: []byte(`{}`)},
	{Index: 5, Key: "a|k3", View: "a", Kind: KindRow, Value: []byte(`{"v":8}`)},
	{Index: 6, Key: "a|k3", View: "a", Kind: KindRow, Tombstone: true},
}

var vAtLeast5 = map[string]Selection{"a": func(r Record) bool {
	var row struct{ V int }
	return json.Unmarshal(r.Value, &row) == nil && row.V >= 5
}}

// se returns the entries of selTopic at idx; an index written negative is delivered as a
// tombstone of its key (a move out).
func se(idx ...int64) []Entry {
	var out []Entry
	for _, i := range idx {
		tomb := i < 0
		if tomb {
			i = -i
		}
		for _, r := range selTopic {
			if r.Index == i {
				out = append(out, Entry{Index: r.Index, Key: r.Key, View: r.View, Kind: r.Kind, Tombstone: r.Tombstone || tomb})
			}
		}
	}
	return out
}

func TestSelections(t *testing.T) {
	tests := []struct {
		name string
		run  func(c *Checker)
		want []Guarantee
	}{
		{"moves in and out, delete", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(-2, 3, 4, 5, 6))
		}, nil},
		{"resumed: an extra tombstone of a key not held is harmless", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.HelloSelect("t", va, p(1), vAtLeast5)
			c.Batch("t", se(-2, 3, 4, 5, 6))
		}, nil},
		{"a row that does not pass comes as a row", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(2, 3, 4, 5, 6))
		}, []Guarantee{Resumable, Reliable}},
		{"a move out not delivered", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(3, 4, 5, 6))
		}, []Guarantee{Resumable}},
		{"a passing row skipped", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(-2, 4, 5, 6))
		}, []Guarantee{Resumable, Reliable}},
		{"a snapshot with a row that does not pass", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 2, va)
			c.Batch("t", se(1, 2))
			c.SnapshotEnd("t", 2)
			c.Batch("t", se(3, 4, 5, 6))
		}, []Guarantee{Resumable, Reliable}},
		{"a snapshot without a passing row", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 3, va)
			c.SnapshotEnd("t", 3)
			c.Batch("t", se(4, 5, 6))
		}, []Guarantee{Reliable}},
		{"a tombstone for a row that passes", func(c *Checker) {
			c.HelloSelect("t", va, nil, vAtLeast5)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(-2, -3, 4, 5, 6))
		}, []Guarantee{Resumable, Reliable}},
		{"unselected: the same deliveries are wrong whole", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 1, va)
			c.Batch("t", se(0))
			c.SnapshotEnd("t", 1)
			c.Batch("t", se(-2, 3, 4, 5, 6))
		}, []Guarantee{Resumable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			tc.run(c)
			vs := c.Violations(selTopic)
			var got []Guarantee
			for _, v := range vs {
				if !slices.Contains(got, v.Guarantee) {
					got = append(got, v.Guarantee)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("guarantees %v, want %v; violations: %v", got, want, vs)
			}
		})
	}
}

func TestSelectedSnapshotLeavesOut(t *testing.T) {
	// The snapshot at 3 rightly lacks k1 (moved out at 2): neither missing nor stale.
	c := New()
	c.HelloSelect("t", va, nil, vAtLeast5)
	c.SnapshotBegin("t", 3, va)
	c.Batch("t", se(3))
	c.SnapshotEnd("t", 3)
	c.Batch("t", se(4, 5, 6))
	if vs := c.Violations(selTopic); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}
