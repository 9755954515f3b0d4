package player

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestRowStore applies random updates and tombstones (with index gaps, values of random
// sizes) of 3 views to one rowStore per view (as stream.apply does) and to a plain map,
// and checks after every step that the live rows, collected in index order, for all views
// or a subset, from a lower index bound, and of a hash shard, are the map's (index, key,
// frame bytes); that each store finds every live key and no dead one; that the arenas are
// moved (several times) and hold at most about twice the live bytes, the slots at most
// twice the live rows; and that snapshots
// taken earlier read the same rows after later records and moves. With the hash made to
// collide (8 values), keys share hashes and go through the overflow map.
func TestRowStore(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { rowStoreRun(t, seed, false) })
		t.Run(fmt.Sprint(seed, "-collide"), func(t *testing.T) { rowStoreRun(t, seed, true) })
	}
}

func rowStoreRun(t *testing.T, seed uint64, collide bool) {
	if collide {
		defer func(h func(string) uint64) { rowHash = h }(rowHash)
		rowHash = func(k string) uint64 { return record.KeyHash(k) & 7 }
	}
	rnd := rand.New(rand.NewPCG(seed, 7))
	views := []string{"a", "b", "c"}
	stores := map[string]*rowStore{}
	for _, v := range views {
		stores[v] = newRowStore(v)
	}
	list := func(sel map[string]bool) []*rowStore {
		var out []*rowStore
		for _, v := range views {
			if sel == nil || sel[v] {
				out = append(out, stores[v])
			}
		}
		return out
	}
	live := map[string]*item{} // view/key -> row
	var index int64
	moves := 0
	type snap struct {
		rows *snapRows
		want []*item
	}
	var snaps []snap
	nkeys := 1 + rnd.IntN(200)
	for step := range 4000 {
		index += 1 + int64(rnd.IntN(3))
		v := views[rnd.IntN(len(views))]
		k := string(record.EncodeKey(v, fmt.Sprint(rnd.IntN(nkeys))))
		st := stores[v]
		gen := st.gen
		if rnd.IntN(4) == 0 { // tombstone
			_, had := live[v+"/"+k]
			if st.remove(k) != had {
				t.Fatalf("step %d: remove(%s) = %v, the key had a row: %v", step, k, !had, had)
			}
			delete(live, v+"/"+k)
		} else {
			value := []byte(fmt.Sprintf(`{"k":%q,"pad":%q}`, k, strings.Repeat("x", rnd.IntN(300))))
			it := entryItem(&statecastv1.Entry{Index: index, View: v, Key: []byte(k), Value: value, Kind: statecastv1.Kind_KIND_ROW, Txn: rnd.IntN(2) == 0})
			_, had := live[v+"/"+k]
			if st.put(it) == had {
				t.Fatalf("step %d: put(%s) new %v, the key had a row: %v", step, k, had, had)
			}
			live[v+"/"+k] = it
		}
		if st.gen != gen {
			moves++
		}
		if err := st.check(); err != nil {
			t.Fatalf("step %d: %v (overflow %d)", step, err, len(st.overflow))
		}
		liveB := 0
		for _, v := range views {
			st := stores[v]
			n := 0
			for key, r := range live {
				if r.view != v {
					continue
				}
				n++
				got := st.get(r.key)
				if got == nil || !sameItem(got, r) {
					t.Fatalf("step %d: get(%s) = %v, want the row at %d", step, key, got, r.index)
				}
			}
			if st.live != n {
				t.Fatalf("step %d: view %s: live %d, want %d", step, v, st.live, n)
			}
			if len(st.slots) > 2*n+1 {
				t.Fatalf("step %d: view %s: %d slots for %d live rows: not compacted", step, v, len(st.slots), n)
			}
			if st.deadB > max(st.liveB, 2*chunkFirst)+2*moveBudget {
				t.Fatalf("step %d: view %s: %d dead bytes for %d live: not moved", step, v, st.deadB, st.liveB)
			}
			liveB += st.liveB
		}
		for _, dead := range []string{"nokey", string(record.EncodeKey(v, "nokey"))} {
			if st.get(dead) != nil {
				t.Fatalf("step %d: get(%s) found a row", step, dead)
			}
		}
		var all []*item
		for _, r := range live {
			all = append(all, r)
		}
		slices.SortFunc(all, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
		checkRows(t, fmt.Sprintf("step %d: all", step), collectRows(list(nil), nil, 0), all)
		// A view subset, from a random lower bound.
		sel := map[string]bool{views[rnd.IntN(3)]: true, views[rnd.IntN(3)]: true}
		from := rnd.Int64N(index + 2)
		want := slices.DeleteFunc(slices.Clone(all), func(r *item) bool { return !sel[r.view] || r.index < from })
		checkRows(t, fmt.Sprintf("step %d: views %v from %d", step, sel, from), collectRows(list(sel), nil, from), want)
		// The same with a hash shard of one view kept (from the records' hashes).
		n := uint32(1 + rnd.IntN(5))
		shard := uint32(rnd.IntN(int(n)))
		sharded := views[rnd.IntN(3)]
		var keeps []func(uint64) bool
		for _, st := range list(sel) {
			if st.view == sharded {
				keeps = append(keeps, func(h uint64) bool { return record.ShardOfHash(h, n) == shard })
			} else {
				keeps = append(keeps, nil)
			}
		}
		wantShard := slices.DeleteFunc(slices.Clone(want), func(r *item) bool {
			return r.view == sharded && record.ShardOfHash(rowHash(r.key), n) != shard
		})
		checkRows(t, fmt.Sprintf("step %d: views %v from %d, shard %d/%d of %s", step, sel, from, shard, n, sharded), collectRows(list(sel), keeps, from), wantShard)
		if step%700 == 0 {
			snaps = append(snaps, snap{collectRows(list(nil), nil, 0), all})
		}
		_ = liveB
	}
	runtime.GC() // chunks the stores dropped must live on in the snapshots
	for i, s := range snaps {
		checkRows(t, fmt.Sprintf("snapshot %d read at the end", i), s.rows, s.want)
	}
	if moves < 2 {
		t.Fatalf("%d moves of an arena in 4000 steps over %d keys", moves, nkeys)
	}
}

// sameItem reports whether a and b are the same row: index, view, key, kind, txn and
// frame bytes.
func sameItem(a, b *item) bool {
	return a.index == b.index && a.view == b.view && a.key == b.key && a.kind == b.kind && a.txn == b.txn &&
		bytes.Equal(a.single, b.single) && bytes.Equal(a.wire, b.wire)
}

func checkRows(t *testing.T, what string, got *snapRows, want []*item) {
	t.Helper()
	items := got.items()
	var size int64
	for _, it := range want {
		size += int64(it.size())
	}
	if !slices.EqualFunc(items, want, sameItem) || got.bytes != size {
		t.Fatalf("%s: rows %v (%d bytes), want %v (%d bytes)", what, indexes(items), got.bytes, indexes(want), size)
	}
}

// TestRowStoreOutOfOrderPanics: the arena is the index order, so a row put below the
// last one is a bug and must not silently corrupt snapshots.
func TestRowStoreOutOfOrderPanics(t *testing.T) {
	st := newRowStore("v")
	row := func(i int64) *item {
		return entryItem(&statecastv1.Entry{Index: i, View: "v", Key: record.EncodeKey("v", "k"), Value: []byte(`{}`)})
	}
	st.put(row(5))
	for name, f := range map[string]func(){
		"put below":      func() { st.put(row(4)) },
		"put same index": func() { st.put(row(5)) },
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
	if st.live != 1 || collectRows([]*rowStore{st}, nil, 0).len() != 1 {
		t.Fatalf("after refused puts: live %d", st.live)
	}
}

// TestSnapshotRowsFromApply drives stream.apply with random rows, tombstones, control
// records of 3 views and position records, and checks stream.snapshotRows against a model
// of the latest row per key: for all views and for subsets, from a log start, the live
// rows sorted by index; and stream.snapshotItems: the same plus the latest position record
// at its index, for every subset.
func TestSnapshotRowsFromApply(t *testing.T) {
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}}, HistoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	rnd := rand.New(rand.NewPCG(3, 4))
	views := []string{"a", "b", "c"}
	model := map[string]*item{} // key -> latest row
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
		if kind == record.KindRow {
			if value == nil {
				delete(model, string(key))
			} else {
				model[string(key)] = itemOf(m)
			}
		}
		if step%100 != 0 {
			continue
		}
		for _, sel := range []viewSet{nil, {"a"}, {"b", "c"}, {"zz"}} {
			from := rnd.Int64N(off + 1)
			s.mu.Lock()
			got := s.snapshotRows(sel, from, nil)
			var want []*item
			for _, it := range model {
				if (sel == nil || sel.has(it.view)) && it.index >= from {
					want = append(want, it)
				}
			}
			if n := s.nrows; n != len(model) {
				t.Fatalf("step %d: nrows %d, want %d", step, n, len(model))
			}
			s.mu.Unlock()
			slices.SortFunc(want, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
			checkRows(t, fmt.Sprintf("step %d, views %v, from %d", step, sel, from), got, want)
			s.mu.Lock()
			items, pos, lsn := s.snapshotItems(sel, from, nil), s.position, s.posLSN
			s.mu.Unlock()
			if pos != nil && pos.index >= from {
				want = append(want, pos)
				slices.SortFunc(want, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
			}
			checkRows(t, fmt.Sprintf("step %d, views %v, from %d, with the position", step, sel, from), items, want)
			if pos != nil && lsn != fmt.Sprintf("0/%X", pos.index) {
				t.Fatalf("step %d: source position %q of the position record at %d", step, lsn, pos.index)
			}
		}
	}
}

// check reports a location of the maps that points into an arena the store no longer has.
func (r *rowStore) check() error {
	for h, loc := range r.byHash {
		if loc>>63 != r.gen && r.next == nil {
			return fmt.Errorf("byHash %x: a location of a dropped arena", h)
		}
	}
	for k, loc := range r.overflow {
		if loc>>63 != r.gen && r.next == nil {
			return fmt.Errorf("overflow %q: a location of a dropped arena", k)
		}
	}
	return nil
}
