package player

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// BenchmarkSelectionMemory reports the heap one compiled selection takes (an equality
// filter of its own per target), the player's memory per filtered target beyond its queue.
func BenchmarkSelectionMemory(b *testing.B) {
	cols := func(string) []string { return []string{"id", "tenant_id", "region", "amount", "status"} }
	const n = 1000
	keep := make([]map[string]*selection, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "orders", Filter: fmt.Sprintf(`tenant_id == "t%d"`, i)}}}, nil, cols)
		if err != nil {
			b.Fatal(err)
		}
		keep[i] = sels
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	for b.Loop() {
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/target")
}

// BenchmarkSelectionChoose is the dispatcher's cost of one change for one filtered target
// (the row decoded once per change, shared; the filter evaluated per target), against
// one unfiltered target (no evaluation).
func BenchmarkSelectionChoose(b *testing.B) {
	cols := func(string) []string { return []string{"id", "tenant_id", "region", "amount", "status"} }
	sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "orders", Filter: `tenant_id == "t7"`}}}, nil, cols)
	if err != nil {
		b.Fatal(err)
	}
	sel := sels["orders"]
	it := entryItem(&statecastv1.Entry{Index: 1, View: "orders", Key: record.EncodeKey("orders", "1"),
		Value: []byte(`{"id":1,"tenant_id":"t7","region":"eu","amount":"12.50","status":"open"}`)})
	prev := entryItem(&statecastv1.Entry{Index: 0, View: "orders", Key: record.EncodeKey("orders", "1"),
		Value: []byte(`{"id":1,"tenant_id":"t3","region":"eu","amount":"12.50","status":"open"}`)})
	const targets = 100
	b.Run("filtered", func(b *testing.B) {
		for b.Loop() {
			d := dispatch{it: it, cur: rowVals{it: it}, prev: &rowVals{it: prev}}
			for range targets {
				if sel.choose(&d.cur, func() bool { return sel.passes(d.prev) }) == nil {
					b.Fatal("the row passes")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/targets, "ns/target")
	})
	b.Run("whole", func(b *testing.B) {
		var t target
		for b.Loop() {
			for range targets {
				if t.selectionOf(it.view) != nil {
					b.Fatal("selected")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/targets, "ns/target")
	})
}

// BenchmarkSelectionIndexed: one change of a view that 10,000 targets select, each by an
// equality filter of its own (tenant_id == "tN"): the index (viewIndex) gives the two
// candidates (the row's tenant before and after) and only those are evaluated. Reported
// per change, beside the loop over 100 unfiltered targets (their selection lookup) and
// the scan of all 10,000 filters that the index replaces.
func BenchmarkSelectionIndexed(b *testing.B) {
	cols := func(string) []string { return []string{"id", "tenant_id", "region", "amount", "status"} }
	const n = 10_000
	x := newViewIndex()
	var all []*target
	for i := range n {
		sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "orders", Filter: fmt.Sprintf(`tenant_id == "t%d"`, i)}}}, nil, cols)
		if err != nil {
			b.Fatal(err)
		}
		t := &target{sels: []*selection{sels["orders"]}}
		x.add(t, sels["orders"])
		all = append(all, t)
	}
	row := func(idx int64, tenant int) *item {
		return entryItem(&statecastv1.Entry{Index: idx, View: "orders", Key: record.EncodeKey("orders", "1"),
			Value: fmt.Appendf(nil, `{"id":1,"tenant_id":"t%d","region":"eu","amount":"12.50","status":"open"}`, tenant)})
	}
	cur, prev := row(1, 7), row(0, 3)
	b.Run("indexed-10000", func(b *testing.B) {
		got := 0
		for b.Loop() {
			c, p := &rowVals{it: cur}, &rowVals{it: prev}
			x.candidates(c, p, func(t *target) {
				sel := t.selectionOf("orders")
				if sel.choose(c, func() bool { return sel.passes(p) }) != nil {
					got++
				}
			})
		}
		if got != 2*b.N {
			b.Fatalf("%d entries for %d changes, want 2 each (a move in, a move out)", got, b.N)
		}
	})
	b.Run("scan-10000", func(b *testing.B) {
		for b.Loop() {
			c, p := &rowVals{it: cur}, &rowVals{it: prev}
			for _, t := range all {
				sel := t.selectionOf("orders")
				sel.choose(c, func() bool { return sel.passes(p) })
			}
		}
	})
	b.Run("unfiltered-100", func(b *testing.B) {
		var ts [100]target
		d := dispatch{it: cur, woken: map[*target]struct{}{}}
		for b.Loop() {
			for i := range ts {
				if ts[i].selectionOf("orders") == nil {
					d.woken[&ts[i]] = struct{}{}
				}
			}
			clear(d.woken)
		}
	})
}
