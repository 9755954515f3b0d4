package checker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A simulated correct player: random topics (views, tombstones, control records, position
// records that every target receives, gaps),
// random targets that bootstrap, reconnect, crash and resume from an earlier applied
// index, and get resync snapshots. The checker must accept every such history, and must
// reject it after one seeded fault: a duplicated, a dropped or a swapped entry.

type simEvent struct {
	kind    eventKind
	views   []string
	resume  *int64
	index   int64
	entries []Entry
}

func randomTopic(r *rand.Rand) []Record {
	var out []Record
	idx := int64(0)
	views := []string{"a", "b", "c"}
	for range 150 + r.IntN(150) {
		idx += 1 + int64(r.IntN(3)/2) // some gaps
		v := views[r.IntN(len(views))]
		switch {
		case r.IntN(30) == 0:
			out = append(out, Record{Index: idx, Key: "!ctl|" + v + "|poll", View: v, Kind: KindPoll})
		case r.IntN(10) == 0:
			out = append(out, Record{Index: idx, Key: "!ctl|position", Kind: KindPosition})
		default:
			out = append(out, Record{Index: idx, Key: fmt.Sprintf("%s|k%d", v, r.IntN(15)), View: v, Kind: KindRow, Tombstone: r.IntN(8) == 0})
		}
	}
	return out
}

func entryOf(rec Record) Entry {
	return Entry{Index: rec.Index, Key: rec.Key, View: rec.View, Kind: rec.Kind, Tombstone: rec.Tombstone}
}

// stateAt is the snapshot of views as of x: latest live row per key and the latest
// position record, sorted by index.
func stateAt(topic []Record, vs viewSet, x int64) []Entry {
	last := map[string]Record{}
	for _, rec := range topic {
		if rec.Index <= x && (kindOf(rec.Kind) == KindRow && vs.has(rec.View) || kindOf(rec.Kind) == KindPosition) {
			last[rec.Key] = rec
		}
	}
	var out []Entry
	for _, rec := range last {
		if !rec.Tombstone {
			out = append(out, entryOf(rec))
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return int(a.Index - b.Index) })
	return out
}

// simulate produces a correct history of one target over topic.
func simulate(r *rand.Rand, topic []Record) []simEvent {
	var ev []simEvent
	all := [][]string{nil, {"a"}, {"b", "c"}, {"a", "c"}}
	views := all[r.IntN(len(all))]
	vs := newViewSet(views)
	end := topic[len(topic)-1].Index
	snapshot := func(x int64) {
		ev = append(ev, simEvent{kind: evSnapBegin, index: x, views: views})
		rows := stateAt(topic, vs, x)
		for len(rows) > 0 {
			n := min(len(rows), 1+r.IntN(6))
			ev = append(ev, simEvent{kind: evBatch, entries: rows[:n]})
			rows = rows[n:]
		}
		ev = append(ev, simEvent{kind: evSnapEnd, index: x})
	}
	// Bootstrap at a random point.
	ev = append(ev, simEvent{kind: evHello, views: views})
	pos := topic[r.IntN(len(topic))].Index
	snapshot(pos)
	applied := []int64{pos} // positions the client reached in this lineage
	for pos < end {
		switch k := r.IntN(20); {
		case k == 0: // crash: resume from an earlier applied position
			back := applied[r.IntN(len(applied))]
			pos = back
			applied = slices.DeleteFunc(applied, func(p int64) bool { return p > back })
			ev = append(ev, simEvent{kind: evHello, views: views, resume: &back})
		case k == 1: // clean reconnect
			p := pos
			ev = append(ev, simEvent{kind: evHello, views: views, resume: &p})
		case k == 2: // resync and a fresh snapshot at a later point
			p := pos
			ev = append(ev, simEvent{kind: evHello, views: views, resume: &p})
			ev = append(ev, simEvent{kind: evResync})
			x := pos + int64(r.IntN(20))
			snapshot(x)
			pos = x
			applied = []int64{x}
		case k == 3: // progress over records of other views
			next := pos
			for _, rec := range topic {
				if rec.Index > pos && vs.wants(rec) {
					break
				}
				if rec.Index > pos {
					next = rec.Index
				}
			}
			if next > pos {
				ev = append(ev, simEvent{kind: evProgress, index: next})
				pos = next
				applied = append(applied, pos)
			}
		default: // a live batch: the next records of the views
			var batch []Entry
			for _, rec := range topic {
				if rec.Index > pos && vs.wants(rec) {
					batch = append(batch, entryOf(rec))
					if len(batch) == 1+r.IntN(5) {
						break
					}
				}
			}
			if len(batch) == 0 {
				pos = end
				break
			}
			ev = append(ev, simEvent{kind: evBatch, entries: batch})
			pos = batch[len(batch)-1].Index
			applied = append(applied, pos)
		}
	}
	return ev
}

func replay(id string, evs []simEvent, topic []Record) error {
	c := New()
	for _, e := range evs {
		switch e.kind {
		case evHello:
			c.Hello(id, e.views, e.resume)
		case evBatch:
			c.Batch(id, e.entries)
		case evProgress:
			c.Progress(id, e.index)
		case evSnapBegin:
			c.SnapshotBegin(id, e.index, e.views)
		case evSnapEnd:
			c.SnapshotEnd(id, e.index)
		case evResync:
			c.Resync(id, "test")
		}
	}
	return c.Check(topic)
}

// liveBatches returns the positions of live batches whose entry j is followed, in the same
// session, by a later entry or progress (so that dropping it leaves a visible gap).
func liveBatches(evs []simEvent) (pos [][2]int) {
	inSnap := false
	for i, e := range evs {
		switch e.kind {
		case evSnapBegin:
			inSnap = true
		case evSnapEnd:
			inSnap = false
		case evHello:
			inSnap = false
		case evBatch:
			if inSnap {
				continue
			}
			for j := range e.entries {
				if j < len(e.entries)-1 || followedInSession(evs, i) {
					pos = append(pos, [2]int{i, j})
				}
			}
		}
	}
	return pos
}

func followedInSession(evs []simEvent, i int) bool {
	for _, e := range evs[i+1:] {
		switch e.kind {
		case evHello:
			return false
		case evBatch, evProgress:
			return true
		}
	}
	return false
}

func cloneEvents(evs []simEvent) []simEvent {
	out := slices.Clone(evs)
	for i := range out {
		out[i].entries = slices.Clone(out[i].entries)
	}
	return out
}

func TestRandomHistories(t *testing.T) {
	var hellos, resyncs, progress, faultsRun int
	defer func() {
		t.Logf("200 histories: %d hellos, %d resyncs, %d progress frames; %d seeded faults detected", hellos, resyncs, progress, faultsRun)
	}()
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 42))
		topic := randomTopic(r)
		evs := simulate(r, topic)
		for _, e := range evs {
			switch e.kind {
			case evHello:
				hellos++
			case evResync:
				resyncs++
			case evProgress:
				progress++
			}
		}
		if err := replay("t", evs, topic); err != nil {
			t.Fatalf("seed %d: a correct history was rejected: %v", seed, err)
		}
		cands := liveBatches(evs)
		if len(cands) == 0 {
			continue
		}
		at := cands[r.IntN(len(cands))]
		faults := []struct {
			name string
			want []error
			do   func([]simEvent)
		}{
			{"duplicate", []error{ErrOrdered, ErrUnique}, func(e []simEvent) {
				b := &e[at[0]]
				b.entries = slices.Insert(b.entries, at[1]+1, b.entries[at[1]])
			}},
			{"drop", []error{ErrResumable}, func(e []simEvent) {
				b := &e[at[0]]
				b.entries = slices.Delete(b.entries, at[1], at[1]+1)
			}},
			{"swap", []error{ErrOrdered}, func(e []simEvent) {
				b := &e[at[0]]
				if at[1]+1 < len(b.entries) {
					b.entries[at[1]], b.entries[at[1]+1] = b.entries[at[1]+1], b.entries[at[1]]
				} else {
					b.entries = slices.Insert(b.entries, 0, b.entries[at[1]]) // an index before its predecessors
					b.entries = b.entries[:len(b.entries)-1]
				}
			}},
		}
		for _, f := range faults {
			bad := cloneEvents(evs)
			f.do(bad)
			if len(bad[at[0]].entries) < 2 && f.name == "swap" {
				continue
			}
			err := replay("t", bad, topic)
			if err == nil {
				t.Fatalf("seed %d: %s at %v not detected", seed, f.name, at)
			}
			if !slices.ContainsFunc(f.want, func(w error) bool { return errors.Is(err, w) }) {
				t.Fatalf("seed %d: %s reported as %v, want one of %v", seed, f.name, err, f.want)
			}
			faultsRun++
		}
	}
}
