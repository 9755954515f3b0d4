package bench

import (
	"slices"
	"testing"
	"time"
)

func indexes(r *Receiver) []int64 {
	var out []int64
	for _, d := range r.Deliveries() {
		out = append(out, d.Index)
	}
	return out
}

func TestBareFanout(t *testing.T) {
	// Three subscribers over two connections; subscriber 2 never reads.
	b, err := StartBare(3, 2, func(i int) bool { return i == 2 })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 10 {
		b.Publish(EncodeBatch(BareEntry(i, 100, 4)))
	}
	b.Publish(EncodeBatch(BareEntry(10, 100, 4), BareEntry(11, 100, 4)))
	if !WaitFor(10*time.Second, func() bool { return AllHave(b.Recv, 12) }) {
		t.Fatalf("receivers have %d and %d entries, want 12", b.Recv[0].Count(), b.Recv[1].Count())
	}
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	for _, r := range b.Recv[:2] {
		if got := indexes(r); !slices.Equal(got, want) {
			t.Errorf("%s got %v, want %v in order", r.ID, got, want)
		}
		for _, d := range r.Deliveries() {
			if d.Stamp == 0 || d.Applied < d.Stamp {
				t.Errorf("%s index %d: stamp %d applied %d", r.ID, d.Index, d.Stamp, d.Applied)
			}
		}
	}
	if b.Recv[2].Count() != 0 {
		t.Errorf("the stalled subscriber applied %d entries", b.Recv[2].Count())
	}
	if pf := PerFrame(b.Recv[:2]); pf != 12.0/11 {
		t.Errorf("PerFrame = %v, want 12/11", pf)
	}

	// PublishTo reaches the named subscribers only. A Publish to all after it comes behind it
	// on every stream: once subscriber 0 has that one, it would have had the first.
	b.PublishTo([]int{1}, EncodeBatch(BareEntry(12, 100, 4)))
	b.Publish(EncodeBatch(BareEntry(13, 100, 4)))
	if !WaitFor(10*time.Second, func() bool { return b.Recv[0].Count() >= 13 && b.Recv[1].Count() >= 14 }) {
		t.Fatalf("subscribers 0 and 1 have %d and %d entries, want 13 and 14", b.Recv[0].Count(), b.Recv[1].Count())
	}
	if got := indexes(b.Recv[0]); !slices.Equal(got, slices.Concat(want, []int64{13})) {
		t.Errorf("subscriber 0 got %v after a PublishTo to subscriber 1 only", got)
	}
	if got := indexes(b.Recv[1]); !slices.Equal(got, slices.Concat(want, []int64{12, 13})) {
		t.Errorf("subscriber 1 got %v", got)
	}
}
