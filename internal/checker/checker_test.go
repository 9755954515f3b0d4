package checker

import (
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// sarama starts go-metrics' process-wide meter goroutine on first use; it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// The topic of every hand-made history: views a and b, a tombstone, a control record,
// and a gap at 6 (a transaction marker or a compacted record).
var topic = []Record{
	{Index: 0, Key: "a|k1", View: "a", Kind: KindRow},
	{Index: 1, Key: "b|k1", View: "b", Kind: KindRow},
	{Index: 2, Key: "a|k2", View: "a", Kind: KindRow},
	{Index: 3, Key: "a|k1", View: "a", Kind: KindRow, Tombstone: true},
	{Index: 4, Key: "!ctl|a|poll", View: "a", Kind: KindPoll},
	{Index: 5, Key: "a|k3", View: "a", Kind: KindRow},
	{Index: 7, Key: "b|k2", View: "b", Kind: KindRow},
	{Index: 8, Key: "a|k2", View: "a", Kind: KindRow},
}

// e returns the entries of the topic at the given indexes, as delivered.
func e(idx ...int64) []Entry {
	var out []Entry
	for _, i := range idx {
		for _, r := range topic {
			if r.Index == i {
				out = append(out, Entry{Index: r.Index, Key: r.Key, View: r.View, Kind: r.Kind, Tombstone: r.Tombstone})
			}
		}
	}
	return out
}

func p(i int64) *int64 { return &i }

var (
	va = []string{"a"}
	vb = []string{"b"}
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		run  func(c *Checker)
		want []Guarantee // exact set of guarantees reported; nil = no violation
	}{
		{"bootstrap then live then resume", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 2, va)
			c.Batch("t", e(0, 2))
			c.Batch("t", e(0, 2)[1:]) // nothing: keep the batch shape realistic
			c.SnapshotEnd("t", 2)
			c.Batch("t", e(3, 4))
			c.Hello("t", va, p(4))
			c.Batch("t", e(5, 8))
		}, []Guarantee{Unique, Ordered}}, // the repeated snapshot batch holds k2 twice, out of order
		{"valid bootstrap, live, reconnect, resume", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 2, va)
			c.Batch("t", e(0, 2))
			c.SnapshotEnd("t", 2)
			c.Batch("t", e(3, 4))
			c.Hello("t", va, p(4))
			c.Batch("t", e(5))
			c.Batch("t", e(8))
		}, nil},
		{"valid resync then snapshot", func(c *Checker) {
			c.Hello("t", va, p(0))
			c.Resync("t", "below log start")
			c.SnapshotBegin("t", 5, va)
			c.Batch("t", e(2, 5))
			c.SnapshotEnd("t", 5)
			c.Batch("t", e(8))
		}, nil},
		{"valid resync to a snapshot below the resume index", func(c *Checker) {
			c.Hello("t", va, p(7)) // an index of a topic since created again, or ahead of the log
			c.Resync("t", "topic changed")
			c.SnapshotBegin("t", 2, va)
			c.Batch("t", e(0, 2))
			c.SnapshotEnd("t", 2)
			c.Batch("t", e(3, 4, 5, 8))
		}, nil},
		{"valid progress for a filtered target", func(c *Checker) {
			c.Hello("t", vb, p(-1))
			c.Batch("t", e(1))
			c.Progress("t", 5)
			c.Batch("t", e(7))
			c.Progress("t", 8)
		}, nil},
		{"valid redelivery of what the client never applied", func(c *Checker) {
			c.Hello("t", va, p(-1))
			c.Batch("t", e(0, 2, 3))
			c.Hello("t", va, p(2)) // killed before applying 3
			c.Batch("t", e(3, 4, 5, 8))
		}, nil},
		{"valid snapshot cut by a disconnect, then a new bootstrap", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 5, va)
			c.Batch("t", e(2))
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 8, va)
			c.Batch("t", e(5, 8))
			c.SnapshotEnd("t", 8)
		}, nil},
		{"valid gone target", func(c *Checker) {
			c.Hello("t", va, p(-1))
			c.Batch("t", e(0))
			c.Gone("t")
		}, nil},

		{"ordered: batch out of order", func(c *Checker) {
			c.Hello("t", va, p(-1))
			c.Batch("t", e(0, 3, 2, 4, 5, 8))
		}, []Guarantee{Ordered, Resumable}}, // 3 arrives while 2 is still missing
		{"ordered: progress goes back", func(c *Checker) {
			c.Hello("t", vb, p(-1))
			c.Batch("t", e(1, 7))
			c.Progress("t", 5)
			c.Progress("t", 8)
		}, []Guarantee{Ordered}},
		{"unique: index delivered twice across a reconnect", func(c *Checker) {
			c.Hello("t", va, p(-1))
			c.Batch("t", e(0, 2, 3))
			c.Hello("t", va, p(3))
			c.Batch("t", e(3, 4, 5, 8))
		}, []Guarantee{Ordered, Unique, Resumable}},
		{"unique: snapshot on a resumed session without resync", func(c *Checker) {
			c.Hello("t", va, p(2))
			c.SnapshotBegin("t", 5, va)
			c.Batch("t", e(2, 5))
			c.SnapshotEnd("t", 5)
			c.Batch("t", e(8))
		}, []Guarantee{Unique}},
		{"unique: snapshot holds a key twice", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 8, va)
			c.Batch("t", e(2, 5, 8))
			c.SnapshotEnd("t", 8)
		}, []Guarantee{Unique}},
		{"reliable: target stops short of the end", func(c *Checker) {
			c.Hello("t", va, p(-1))
			c.Batch("t", e(0, 2, 3))
		}, []Guarantee{Reliable}},
		{"reliable: snapshot lacks a key and holds a deleted one", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 5, va)
			c.Batch("t", e(0, 2))
			c.SnapshotEnd("t", 5)
			c.Batch("t", e(8))
		}, []Guarantee{Reliable}},
		{"reliable: new target never bootstrapped", func(c *Checker) {
			c.Hello("t", va, nil)
		}, []Guarantee{Reliable}},
		{"reliable: snapshot never completed", func(c *Checker) {
			c.Hello("t", va, nil)
			c.SnapshotBegin("t", 8, va)
			c.Batch("t", e(5))
		}, []Guarantee{Reliable}},
		{"resumable: a record skipped after the resume index", func(c *Checker) {
			c.Hello("t", va, p(2))
			c.Batch("t", e(4, 5, 8))
			c.Hello("t", va, p(2)) // the gap is repaired later: reliable holds, resumable not
			c.Batch("t", e(3, 4, 5, 8))
		}, []Guarantee{Resumable}},
		{"resumable: entry at or below the resume index", func(c *Checker) {
			c.Hello("t", vb, p(1))
			c.Batch("t", e(1))
			c.Hello("t", vb, p(7))
		}, []Guarantee{Ordered, Unique, Resumable}},
		{"resumable: progress claims records never sent", func(c *Checker) {
			c.Hello("t", vb, p(0))
			c.Progress("t", 8)
			c.Hello("t", vb, p(0))
			c.Batch("t", e(1, 7))
		}, []Guarantee{Resumable}},
		{"resumable: entry of a view not subscribed", func(c *Checker) {
			c.Hello("t", vb, p(-1))
			c.Batch("t", e(1, 2, 7))
		}, []Guarantee{Resumable}},
		{"resumable: entry differs from the topic", func(c *Checker) {
			c.Hello("t", vb, p(-1))
			c.Batch("t", []Entry{{Index: 1, Key: "b|other", View: "b"}, e(7)[0]})
		}, []Guarantee{Resumable}},
		{"resumable: entry not in the topic", func(c *Checker) {
			c.Hello("t", va, p(5))
			c.Batch("t", []Entry{{Index: 6, Key: "a|k9", View: "a"}, e(8)[0]})
		}, []Guarantee{Resumable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			tt.run(c)
			err := c.Check(topic)
			var got []Guarantee
			if err != nil {
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("Check returned %T, want *Error", err)
				}
				for _, v := range ce.Violations {
					if !slices.Contains(got, v.Guarantee) {
						got = append(got, v.Guarantee)
					}
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("guarantees reported = %v, want %v\n%v", got, want, err)
			}
			for _, g := range tt.want {
				if !errors.Is(err, g.sentinel()) {
					t.Errorf("errors.Is(err, %v) = false", g.sentinel())
				}
			}
			if err != nil {
				t.Logf("%v", err)
			}
		})
	}
}

func TestTargetsIndependent(t *testing.T) {
	c := New()
	c.Hello("x", vb, p(-1))
	c.Hello("y", va, p(4))
	c.Batch("x", e(1))
	c.Batch("y", e(5))
	c.Batch("x", e(7))
	c.Batch("y", e(8))
	if err := c.Check(topic); err != nil {
		t.Fatal(err)
	}
	if got := c.Targets(); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("Targets = %v", got)
	}
}

func TestNoTruthChecksStructureOnly(t *testing.T) {
	c := New()
	c.Hello("t", va, p(-1))
	c.Batch("t", e(0, 2))
	if err := c.Check(nil); err != nil {
		t.Fatalf("no truth, valid structure: %v", err)
	}
	c.Batch("t", e(2))
	if err := c.Check(nil); !errors.Is(err, ErrOrdered) {
		t.Fatalf("Check = %v, want ordered", err)
	}
}

func TestAllowCompacted(t *testing.T) {
	c := New(Options{AllowCompacted: true})
	c.Hello("t", va, p(5))
	c.Batch("t", []Entry{{Index: 6, Key: "a|k9", View: "a"}, e(8)[0]})
	if err := c.Check(topic); err != nil {
		t.Fatal(err)
	}
}

// TestPositionRecords: position records belong to every subscription. A target of view b
// receives them live and in its snapshot (the latest one <= X); one that is skipped, or a
// snapshot without the latest one, is a violation; they are never rows.
func TestPositionRecords(t *testing.T) {
	topic := []Record{
		{Index: 0, Key: "a|k1", View: "a", Kind: KindRow},
		{Index: 1, Key: "!ctl|position", Kind: KindPosition},
		{Index: 2, Key: "b|k1", View: "b", Kind: KindRow},
		{Index: 3, Key: "!ctl|position", Kind: KindPosition},
		{Index: 4, Key: "a|k2", View: "a", Kind: KindRow},
		{Index: 5, Key: "!ctl|position", Kind: KindPosition},
	}
	en := func(idx ...int64) []Entry {
		var out []Entry
		for _, i := range idx {
			r := topic[i]
			out = append(out, Entry{Index: r.Index, Key: r.Key, View: r.View, Kind: r.Kind, Tombstone: r.Tombstone})
		}
		return out
	}
	tests := []struct {
		name string
		run  func(c *Checker)
		want []Guarantee
	}{
		{"live to a target of another view", func(c *Checker) {
			c.Hello("t", vb, p(0))
			c.Batch("t", en(1, 2, 3))
			c.Batch("t", en(5))
		}, nil},
		{"a position record skipped", func(c *Checker) {
			c.Hello("t", vb, p(0))
			c.Batch("t", en(2, 3))
			c.Progress("t", 5)
		}, []Guarantee{Resumable, Reliable}},
		{"snapshot with the latest position", func(c *Checker) {
			c.Hello("t", vb, nil)
			c.SnapshotBegin("t", 5, vb)
			c.Batch("t", en(2, 5))
			c.SnapshotEnd("t", 5)
		}, nil},
		{"snapshot without the position", func(c *Checker) {
			c.Hello("t", vb, nil)
			c.SnapshotBegin("t", 5, vb)
			c.Batch("t", en(2))
			c.SnapshotEnd("t", 5)
		}, []Guarantee{Reliable}},
		{"snapshot with an older position", func(c *Checker) {
			c.Hello("t", vb, nil)
			c.SnapshotBegin("t", 5, vb)
			c.Batch("t", en(2, 3))
			c.SnapshotEnd("t", 5)
		}, []Guarantee{Reliable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			tt.run(c)
			var got []Guarantee
			for _, v := range c.Violations(topic) {
				if !slices.Contains(got, v.Guarantee) {
					got = append(got, v.Guarantee)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("violations %v, want %v: %v", got, want, c.Violations(topic))
			}
		})
	}
}
