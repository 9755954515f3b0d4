package player

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestRowOrder applies random updates and tombstones (with index gaps) of 3 views to one
// rowOrder per view (as stream.apply does) and to a plain map, and checks after every step
// that the live rows, merged in index order (mergeRows), for all views or a subset and from
// a lower index bound, are the map's; that compaction keeps at most twice the live slots;
// and that a snapshot taken earlier is not changed by later records.
func TestRowOrder(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { rowOrderRun(t, seed) })
	}
}

func rowOrderRun(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	views := []string{"a", "b", "c"}
	orders := map[string]*rowOrder{"a": {}, "b": {}, "c": {}}
	list := func(sel map[string]bool) []*rowOrder {
		var out []*rowOrder
		for v, o := range orders {
			if sel == nil || sel[v] {
				out = append(out, o)
			}
		}
		return out
	}
	live := map[string]*item{} // view/key -> row
	var index int64
	compactions := 0
	kill := func(o *rowOrder, index int64) {
		if o.kill(index); o.dead == 0 { // kill compacted the slots
			compactions++
		}
	}
	var snap []*item
	var snapWant []*item
	nkeys := 1 + rnd.IntN(50)
	for step := range 2000 {
		index += 1 + int64(rnd.IntN(3))
		v := views[rnd.IntN(len(views))]
		k := fmt.Sprint(rnd.IntN(nkeys))
		it := &item{index: index, view: v, key: k}
		o := orders[v]
		old, had := live[v+"/"+k]
		if rnd.IntN(4) == 0 { // tombstone
			if had {
				kill(o, old.index)
				delete(live, v+"/"+k)
			}
		} else {
			if had {
				kill(o, old.index)
			}
			o.add(it)
			live[v+"/"+k] = it
		}
		nlive := 0
		for v, o := range orders {
			n := 0
			for _, r := range live {
				if r.view == v {
					n++
				}
			}
			if o.live() != n {
				t.Fatalf("step %d: view %s: live %d, want %d", step, v, o.live(), n)
			}
			if len(o.slots) > 2*n+1 {
				t.Fatalf("step %d: view %s: %d slots for %d live rows: not compacted", step, v, len(o.slots), n)
			}
			nlive += n
		}
		if nlive != len(live) {
			t.Fatalf("step %d: live %d, want %d", step, nlive, len(live))
		}
		var all []*item
		for _, r := range live {
			all = append(all, r)
		}
		slices.SortFunc(all, func(a, b *item) int { return int(a.index - b.index) })
		// All views, from the start.
		if got := mergeRows(list(nil), nil, 0); !slices.Equal(got, all) {
			t.Fatalf("step %d: rows(all) = %v, want %v", step, indexes(got), indexes(all))
		}
		// A view subset, from a random lower bound.
		sel := map[string]bool{views[rnd.IntN(3)]: true, views[rnd.IntN(3)]: true}
		from := rnd.Int64N(index + 2)
		want := slices.DeleteFunc(slices.Clone(all), func(r *item) bool { return !sel[r.view] || r.index < from })
		if got := mergeRows(list(sel), nil, from); !slices.Equal(got, want) {
			t.Fatalf("step %d: rows(%v, from %d) = %v, want %v", step, sel, from, indexes(got), indexes(want))
		}
		// The same with a hash shard of some views kept (from the slots' hashes).
		n := uint32(1 + rnd.IntN(5))
		shard := uint32(rnd.IntN(int(n)))
		sharded := map[*rowOrder]bool{orders[views[rnd.IntN(3)]]: true}
		var ords []*rowOrder
		var keeps []func(uint64) bool
		for _, o := range list(sel) {
			ords = append(ords, o)
			if sharded[o] {
				keeps = append(keeps, func(h uint64) bool { return record.ShardOfHash(h, n) == shard })
			} else {
				keeps = append(keeps, nil)
			}
		}
		wantShard := slices.DeleteFunc(slices.Clone(want), func(r *item) bool {
			return sharded[orders[r.view]] && record.ShardString(r.key, n) != shard
		})
		if got := mergeRows(ords, keeps, from); !slices.Equal(got, wantShard) {
			t.Fatalf("step %d: rows(%v, from %d, shard %d/%d of one view) = %v, want %v", step, sel, from, shard, n, indexes(got), indexes(wantShard))
		}
		if step == 500 {
			snap, snapWant = mergeRows(list(nil), nil, 0), all
		}
	}
	if !slices.Equal(snap, snapWant) {
		t.Fatalf("a snapshot taken at step 500 changed: %v, want %v", indexes(snap), indexes(snapWant))
	}
	if compactions == 0 {
		t.Fatalf("no compaction in 2000 steps over %d keys", nkeys)
	}
}

// TestRowOrderOutOfOrderPanics: the structure relies on increasing indexes; a violation is
// a bug and must not silently corrupt snapshots.
func TestRowOrderOutOfOrderPanics(t *testing.T) {
	var o rowOrder
	o.add(&item{index: 5})
	for name, f := range map[string]func(){
		"add below":      func() { o.add(&item{index: 4}) },
		"add same index": func() { o.add(&item{index: 5}) },
		"kill unknown":   func() { o.kill(6) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	o.kill(5)
	if o.live() != 0 || len(o.rows(nil, 0, nil)) != 0 {
		t.Fatalf("after kill: live %d", o.live())
	}
}

// TestSnapshotRowsFromApply drives stream.apply with random rows, tombstones, control
// records of 3 views and position records, and checks stream.snapshotRows against the
// per-view maps: for all views and for subsets, from a log start, the live rows sorted by
// index; and stream.snapshotItems: the same plus the latest position record at its index,
// for every subset.
func TestSnapshotRowsFromApply(t *testing.T) {
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}}, HistoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	rnd := rand.New(rand.NewPCG(3, 4))
	views := []string{"a", "b", "c"}
	var off int64
	for step := range 3000 {
		off += 1 + int64(rnd.IntN(3))
		v := views[rnd.IntN(len(views))]
		kind, key, value := record.KindRow, record.EncodeKey(v, fmt.Sprint(rnd.IntN(40))), []byte(`{"x":1}`)
		switch r := rnd.IntN(10); {
		case r == 0:
			kind, key = record.KindPoll, record.ControlKey(v, record.KindPoll)
		case r == 1:
			kind, key, v = record.KindPosition, record.PositionKey(), ""
			value = (&record.Position{LSN: fmt.Sprintf("0/%X", off), Time: time.Now()}).Marshal()
		case r < 4:
			value = nil
		}
		pm := recordsarama.ProducerMessage("t", key, value, record.Meta{View: v, Kind: kind})
		m := &sarama.ConsumerMessage{Offset: off, Key: key, Value: value, Timestamp: time.Now()}
		for _, h := range pm.Headers {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		s.apply(m, false, map[*target]struct{}{})
		if step%100 != 0 {
			continue
		}
		for _, sel := range []map[string]bool{nil, {"a": true}, {"b": true, "c": true}, {"zz": true}} {
			from := rnd.Int64N(off + 1)
			s.mu.Lock()
			got := s.snapshotRows(sel, from, nil)
			var want []*item
			for v, vm := range s.rows {
				if sel != nil && !sel[v] {
					continue
				}
				for _, it := range vm {
					if it.index >= from {
						want = append(want, it)
					}
				}
			}
			n := s.nrows
			if all := s.snapshotRows(nil, 0, nil); len(all) != n {
				t.Fatalf("step %d: %d rows, nrows %d", step, len(all), n)
			}
			s.mu.Unlock()
			slices.SortFunc(want, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, views %v, from %d: rows %v, want %v", step, sel, from, indexes(got), indexes(want))
			}
			if sel == nil && len(got) > n {
				t.Fatalf("step %d: %d rows from %d, nrows %d", step, len(got), from, n)
			}
			s.mu.Lock()
			items, pos, lsn := s.snapshotItems(sel, from, nil), s.position, s.posLSN
			s.mu.Unlock()
			if pos != nil && pos.index >= from {
				want = append(want, pos)
				slices.SortFunc(want, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
			}
			if !slices.Equal(items, want) {
				t.Fatalf("step %d, views %v, from %d: items %v, want %v", step, sel, from, indexes(items), indexes(want))
			}
			if pos != nil && lsn != fmt.Sprintf("0/%X", pos.index) {
				t.Fatalf("step %d: source position %q of the position record at %d", step, lsn, pos.index)
			}
		}
	}
}
