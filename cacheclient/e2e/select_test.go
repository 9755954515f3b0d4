package e2e

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/schemas/record"
)

// subset returns the rows of want whose decoded event passes keep.
func subset(want map[string]string, keep func(k string, e event) bool) map[string]string {
	out := map[string]string{}
	for k, raw := range want {
		if e, _ := decodeEvent(k, []byte(raw)); keep(k, e) {
			out[k] = raw
		}
	}
	return out
}

func selectedClient(t *testing.T, addr, dir string, h cacheclient.Hooks, opts ...cacheclient.ViewOption) (*cacheclient.Client, *cacheclient.View[event]) {
	t.Helper()
	c, err := cacheclient.New(cacheclient.Config{
		Addresses: []string{addr}, Stream: "s", Service: t.Name(), StateDir: dir,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, ReadyIdle: 300 * time.Millisecond,
	}, cacheclient.WithHooks(h))
	if err != nil {
		t.Fatal(err)
	}
	v, err := cacheclient.Register(c, "events", decodeEvent, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("sport", func(e event) []string { return []string{e.Sport} }); err != nil {
		t.Fatal(err)
	}
	return c, v
}

// TestPlayerFilter: a view registered with a filter holds only the rows that pass: from the
// snapshot, then live, where a row that moves in appears and one that moves out is deleted
// (its index entry too, its handler sees a delete); the whole view's epoch-end is not
// checked against the subset. Reselect changes the filter at run time (a resubscription,
// no restart); a restart with a state file resumes only with the same filter.
func TestPlayerFilter(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 30 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, []string{"soccer", "tennis", "golf"}[i%3])})
	}
	addr, _ := startPlayer(t, e)
	dir := t.TempDir()
	var cnt counting
	c, v := selectedClient(t, addr, dir, cnt.hooks(), cacheclient.WithFilter(`sport == "soccer"`))
	var mu sync.Mutex
	ops := map[string]cacheclient.Op{} // the last change of each key
	if err := cacheclient.OnChange(v, func(_ context.Context, ch cacheclient.Change[event]) error {
		mu.Lock()
		ops[ch.Key] = ch.Op
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	soccer := func(_ string, e event) bool { return e.Sport == "soccer" }
	waitReady(t, c)
	if want := subset(e.wantOf("events"), soccer); !equalView(v, want) {
		t.Fatalf("after the snapshot: %d rows, want the %d soccer rows", v.Len(), len(want))
	}
	// 0 soccer -> golf (out), 1 tennis -> soccer (in), 3 soccer deleted, 4 tennis -> golf.
	e.put("events", [2]string{"0", ev(0, "golf")}, [2]string{"1", ev(1, "soccer")}, [2]string{"3", ""}, [2]string{"4", ev(4, "golf")})
	last := e.epochEnd("events", 0)
	eventually(t, "the moves", func() bool { return c.Position() >= last })
	if want := subset(e.wantOf("events"), soccer); !equalView(v, want) {
		t.Fatalf("after the moves: %d rows, want the %d soccer rows", v.Len(), len(want))
	}
	if got := len(v.ByIndex("sport", "golf")); got != 0 {
		t.Fatalf("%d golf rows indexed in a soccer view", got)
	}
	if _, ok := v.Get("0"); ok {
		t.Fatal("row 0 moved out and is still held")
	}
	eventually(t, "the handlers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ops["0"] == cacheclient.OpDelete && ops["3"] == cacheclient.OpDelete && ops["1"] == cacheclient.OpCreate && ops["4"] == 0
	})
	if st := c.Stats(); st.EpochMismatches != 0 {
		t.Fatalf("%d epoch mismatches on a filtered view", st.EpochMismatches)
	}

	// Run time: another filter, the same client.
	if err := v.Reselect(cacheclient.WithFilter(`sport in ["golf", "tennis"] && id < 20`)); err != nil {
		t.Fatal(err)
	}
	golfTennis := func(_ string, e event) bool { return (e.Sport == "golf" || e.Sport == "tennis") && e.ID < 20 }
	eventually(t, "the new filter's rows", func() bool { return equalView(v, subset(e.wantOf("events"), golfTennis)) })
	if got := v.Selection().Filter; got != `sport in ["golf", "tennis"] && id < 20` {
		t.Fatalf("Selection().Filter = %q", got)
	}
	if st := c.Stats(); len(st.Views) != 1 || st.Views[0].Selection != `sport in ["golf", "tennis"] && id < 20` {
		t.Fatalf("Stats().Views = %+v, want the selection", st.Views)
	}
	last = e.put("events", [2]string{"5", ev(5, "soccer")})
	eventually(t, "a move out under the new filter", func() bool { return c.Position() >= last })
	if _, ok := v.Get("5"); ok {
		t.Fatal("row 5 moved out and is still held")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart with the same selection resumes from the state file.
	var same counting
	c2, v2 := selectedClient(t, addr, dir, same.hooks(), cacheclient.WithFilter(`sport in ["golf", "tennis"] && id < 20`))
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c2)
	if !equalView(v2, subset(e.wantOf("events"), golfTennis)) || same.snapshots != 0 {
		t.Fatalf("restart with the same filter: %d rows, %d snapshots; want a resume", v2.Len(), same.snapshots)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	// Another selection does not resume from rows of the old one: a snapshot.
	var other counting
	c3, v3 := selectedClient(t, addr, dir, other.hooks(), cacheclient.WithFilter(`sport == "tennis"`))
	if err := c3.Start(); err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	waitReady(t, c3)
	tennis := func(_ string, e event) bool { return e.Sport == "tennis" }
	if !equalView(v3, subset(e.wantOf("events"), tennis)) || other.snapshots != 1 {
		t.Fatalf("restart with another filter: %d rows, %d snapshots; want a snapshot of the tennis rows", v3.Len(), other.snapshots)
	}
}

// TestPlayerShards: three clients, shards 0, 1, 2 of 3, hold disjoint parts whose union
// is the view, each the rows whose key record.Shard puts in it.
func TestPlayerShards(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 300 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, "soccer")})
	}
	addr, _ := startPlayer(t, e)
	union := map[string]string{}
	for i := range uint32(3) {
		c, v := selectedClient(t, addr, "", cacheclient.Hooks{}, cacheclient.WithShard(i, 3))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitReady(t, c)
		want := subset(e.wantOf("events"), func(k string, _ event) bool {
			return record.Shard(record.EncodeKey("events", k), 3) == i
		})
		if !equalView(v, want) {
			t.Fatalf("shard %d: %d rows, want %d", i, v.Len(), len(want))
		}
		if len(want) < 70 || len(want) > 130 {
			t.Fatalf("shard %d holds %d of 300 rows", i, len(want))
		}
		maps.Copy(union, want)
	}
	if len(union) != 300 {
		t.Fatalf("the shards hold %d distinct rows of 300", len(union))
	}
}

// TestPlayerBadFilterRefused: a filter naming a column the view does not have is refused
// at the Hello; WaitReady returns the player's message naming the view and the column.
func TestPlayerBadFilterRefused(t *testing.T) {
	e := newKafkaEnv(t)
	e.put("events", [2]string{"1", ev(1, "soccer")})
	addr, _ := startPlayer(t, e)
	c, _ := selectedClient(t, addr, "", cacheclient.Hooks{}, cacheclient.WithFilter(`tenant == "x"`))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.WaitReady(ctx)
	if err == nil {
		t.Fatal("WaitReady: nil, want the refusal")
	}
	for _, w := range []string{`"events"`, "tenant"} {
		if !contains(err.Error(), w) {
			t.Errorf("WaitReady: %v; want it to name %s", err, w)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestPlayerColumns: a view registered with a column list receives and stores only those
// columns of each row (the decoder sees them only), while its filter reads any column;
// the view's memory is that of the smaller rows.
func TestPlayerColumns(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 50 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, []string{"soccer", "tennis"}[i%2])})
	}
	addr, _ := startPlayer(t, e)
	whole, wv := selectedClient(t, addr, "", cacheclient.Hooks{})
	cut, cv := selectedClient(t, addr, "", cacheclient.Hooks{}, cacheclient.WithColumns("id", "sport"), cacheclient.WithFilter(`name != "event 3"`))
	for _, c := range []*cacheclient.Client{whole, cut} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitReady(t, c)
	}
	if wv.Len() != 50 || cv.Len() != 49 {
		t.Fatalf("rows: whole %d, cut %d; want 50 and 49 (the filter on a column not received)", wv.Len(), cv.Len())
	}
	got, ok := cv.Get("4")
	if !ok || got != (event{ID: 4, Sport: "soccer"}) {
		t.Fatalf("row 4 = %+v, %v; want id and sport only", got, ok)
	}
	if len(cv.ByIndex("sport", "tennis")) != 24 {
		t.Fatalf("tennis rows %d, want 24", len(cv.ByIndex("sport", "tennis")))
	}
	w, c := whole.Stats().Views[0], cut.Stats().Views[0]
	if c.MemoryBytes >= w.MemoryBytes || c.Selection != `name != "event 3" columns id,sport` {
		t.Fatalf("cut view: %d bytes (whole %d), selection %q", c.MemoryBytes, w.MemoryBytes, c.Selection)
	}
}

// TestPlayerShardScaleOut: a shard client going from shard 0 of 3 to shard 0 of 6 (a
// scale-out, Reselect at run time) keeps the rows of the keys still in its shard: its
// handlers see deletes of the keys that left it and no change of those that stayed.
func TestPlayerShardScaleOut(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 300 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, "soccer")})
	}
	addr, _ := startPlayer(t, e)
	c, v := selectedClient(t, addr, "", cacheclient.Hooks{}, cacheclient.WithShard(0, 3))
	var mu sync.Mutex
	ops := map[string]cacheclient.Op{}
	if err := cacheclient.OnChange(v, func(_ context.Context, ch cacheclient.Change[event]) error {
		mu.Lock()
		ops[ch.Key] = ch.Op
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitReady(t, c)
	in := func(n uint32) map[string]string {
		return subset(e.wantOf("events"), func(k string, _ event) bool { return record.Shard(record.EncodeKey("events", k), n) == 0 })
	}
	if !equalView(v, in(3)) {
		t.Fatalf("shard 0/3: %d rows, want %d", v.Len(), len(in(3)))
	}
	// The handlers run behind the apply: wait for the first snapshot's creates.
	eventually(t, "the first snapshot's creates", func() bool { mu.Lock(); defer mu.Unlock(); return len(ops) == len(in(3)) })
	mu.Lock()
	clear(ops)
	mu.Unlock()
	if err := v.Reselect(cacheclient.WithShard(0, 6)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shard 0 of 6", func() bool { return equalView(v, in(6)) })
	left := len(in(3)) - len(in(6))
	eventually(t, "the deletes of the keys that left", func() bool { mu.Lock(); defer mu.Unlock(); return len(ops) >= left })
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for k, op := range ops {
		if _, stayed := in(6)[k]; stayed || op != cacheclient.OpDelete {
			t.Errorf("key %s: change %v (stayed in the shard: %v)", k, op, stayed)
		}
	}
	if len(ops) != left {
		t.Errorf("%d changes, want the %d deletes", len(ops), left)
	}
}
