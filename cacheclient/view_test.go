package cacheclient

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/statecast/statecast/schemas/record"
)

type event struct {
	ID    int64    `json:"id"`
	Sport string   `json:"sport"`
	Tags  []string `json:"tags"`
}

func decodeEvent(key string, b []byte) (event, error) {
	var e event
	err := json.Unmarshal(b, &e)
	return e, err
}

func newTestClient(t testing.TB, opts ...Option) *Client {
	t.Helper()
	c, err := New(Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "t"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newEventView(t testing.TB) *View[event] {
	t.Helper()
	v, err := Register(newTestClient(t), "events", decodeEvent)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("sport", func(e event) []string { return []string{e.Sport} }); err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("tag", func(e event) []string { return e.Tags }); err != nil {
		t.Fatal(err)
	}
	return v
}

// op is one row of a scripted batch: value "" is a tombstone.
type op struct{ key, value string }

func applyBatch(v *View[event], index int64, ops ...op) {
	for i, o := range ops {
		full := []byte("events|" + o.key)
		v.applyRow(row{key: o.key, fullKey: full, value: []byte(o.value), tombstone: o.value == "", index: index - int64(len(ops)-1-i)})
	}
	v.commit(index)
}

func sorted(s []string) []string { slices.Sort(s); return s }

func ids(es []event) string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprint(e.ID))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestViewApplyAndIndexes(t *testing.T) {
	tests := []struct {
		name    string
		batches [][]op
		wantLen int
		bySport map[string]string // sport -> ids
		sports  []string
		tags    []string
		wantGet map[string]int64 // key -> id (absent: -1)
	}{
		{
			name:    "create",
			batches: [][]op{{{"1", `{"id":1,"sport":"soccer","tags":["a","b"]}`}, {"2", `{"id":2,"sport":"tennis"}`}}},
			wantLen: 2, bySport: map[string]string{"soccer": "1", "tennis": "2"},
			sports: []string{"soccer", "tennis"}, tags: []string{"a", "b"},
			wantGet: map[string]int64{"1": 1, "2": 2, "3": -1},
		},
		{
			name: "update moves index entries and removes empty sets",
			batches: [][]op{
				{{"1", `{"id":1,"sport":"soccer","tags":["a","b"]}`}},
				{{"1", `{"id":1,"sport":"tennis","tags":["b","c"]}`}},
			},
			wantLen: 1, bySport: map[string]string{"soccer": "", "tennis": "1"},
			sports: []string{"tennis"}, tags: []string{"b", "c"},
			wantGet: map[string]int64{"1": 1},
		},
		{
			name: "delete removes object and index entries",
			batches: [][]op{
				{{"1", `{"id":1,"sport":"soccer","tags":["a"]}`}, {"2", `{"id":2,"sport":"soccer"}`}},
				{{"1", ""}},
			},
			wantLen: 1, bySport: map[string]string{"soccer": "2"},
			sports: []string{"soccer"}, tags: nil,
			wantGet: map[string]int64{"1": -1, "2": 2},
		},
		{
			name:    "tombstone of an absent key",
			batches: [][]op{{{"9", ""}}},
			wantLen: 0, sports: nil, tags: nil,
			wantGet: map[string]int64{"9": -1},
		},
		{
			name: "undecodable row hides the key",
			batches: [][]op{
				{{"1", `{"id":1,"sport":"soccer"}`}},
				{{"1", `{not json`}},
			},
			wantLen: 0, bySport: map[string]string{"soccer": ""}, sports: nil,
			wantGet: map[string]int64{"1": -1},
		},
		{
			name: "same key several times in one batch",
			batches: [][]op{{
				{"1", `{"id":1,"sport":"a"}`}, {"1", `{"id":1,"sport":"b"}`}, {"1", ""}, {"1", `{"id":1,"sport":"c"}`},
			}},
			wantLen: 1, bySport: map[string]string{"a": "", "b": "", "c": "1"}, sports: []string{"c"},
			wantGet: map[string]int64{"1": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newEventView(t)
			idx := int64(0)
			for _, b := range tt.batches {
				idx += int64(len(b))
				applyBatch(v, idx, b...)
			}
			if v.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", v.Len(), tt.wantLen)
			}
			if v.Position() != idx {
				t.Errorf("Index = %d, want %d", v.Position(), idx)
			}
			for s, want := range tt.bySport {
				if got := ids(v.ByIndex("sport", s)); got != want {
					t.Errorf("ByIndex(sport, %s) = %q, want %q", s, got, want)
				}
			}
			if got := sorted(v.IndexValues("sport")); !slices.Equal(got, tt.sports) {
				t.Errorf("IndexValues(sport) = %v, want %v", got, tt.sports)
			}
			if got := sorted(v.IndexValues("tag")); !slices.Equal(got, tt.tags) {
				t.Errorf("IndexValues(tag) = %v, want %v", got, tt.tags)
			}
			for k, want := range tt.wantGet {
				e, ok := v.Get(k)
				if (want < 0) == ok || (ok && e.ID != want) {
					t.Errorf("Get(%s) = %v,%v want %d", k, e, ok, want)
				}
			}
			// The epoch accounting covers every live row, decoded or not.
			rows, _ := v.epochState()
			live := map[string]bool{}
			for _, b := range tt.batches {
				for _, o := range b {
					live[o.key] = o.value != ""
				}
			}
			n := 0
			for _, l := range live {
				if l {
					n++
				}
			}
			if rows != int64(n) {
				t.Errorf("epoch rows = %d, want %d", rows, n)
			}
		})
	}
}

func TestEpochHashMatchesContract(t *testing.T) {
	v := newEventView(t)
	applyBatch(v, 2, op{"1", `{"id":1}`}, op{"2", `{"id":2}`})
	applyBatch(v, 4, op{"2", ""}, op{"3", `{"id":3}`})
	want := record.RowHash([]byte("events|1"), []byte(`{"id":1}`)) + record.RowHash([]byte("events|3"), []byte(`{"id":3}`))
	rows, h := v.epochState()
	if rows != 2 || h != want {
		t.Fatalf("epoch state %d %x, want 2 %x", rows, h, want)
	}
}

func TestReplaceEmitsChanges(t *testing.T) {
	c := newTestClient(t)
	v, _ := Register(c, "events", decodeEvent)
	var got []string
	if err := OnChange(v, func(_ context.Context, ch Change[event]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	applyBatch(v, 3, op{"1", `{"id":1}`}, op{"2", `{"id":2}`}, op{"3", `{"id":3}`})
	v.takeChanges()
	v.beginReplace()
	for _, o := range []op{{"2", `{"id":2}`}, {"3", `{"id":33}`}, {"4", `{"id":4}`}} {
		v.stageRow(row{key: o.key, fullKey: []byte("events|" + o.key), value: []byte(o.value)})
	}
	if v.Len() != 3 {
		t.Fatal("staging is visible")
	}
	v.endReplace(10)
	if v.Len() != 3 || len(v.takeChanges()) != 0 {
		t.Fatal("the replacement is visible before it is published")
	}
	v.commit(10)
	for _, ch := range v.takeChanges() {
		got = append(got, ch.Op.String()+":"+ch.Key)
	}
	slices.Sort(got)
	want := []string{"create:4", "delete:1", "update:3"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if v.Len() != 3 || v.Position() != 10 {
		t.Fatalf("len %d index %d", v.Len(), v.Position())
	}
}

// TestReadersSeeWholeBatches: a writer moves a fixed total between keys in each batch; a
// reader's snapshot must always see the same total (never half a batch).
func TestReadersSeeWholeBatches(t *testing.T) {
	c := newTestClient(t)
	v, _ := Register(c, "events", decodeEvent)
	const keys = 50
	var ops []op
	for i := range keys {
		ops = append(ops, op{fmt.Sprint(i), `{"id":10}`})
	}
	applyBatch(v, keys, ops...)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		idx := int64(keys)
		for i := 0; i < 2000; i++ {
			a, b := fmt.Sprint(i%keys), fmt.Sprint((i*7+1)%keys)
			if a == b {
				continue
			}
			ea, _ := v.Get(a)
			eb, _ := v.Get(b)
			idx += 2
			applyBatch(v, idx, op{a, fmt.Sprintf(`{"id":%d}`, ea.ID-1)}, op{b, fmt.Sprintf(`{"id":%d}`, eb.ID+1)})
		}
		close(stop)
	}()
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		s := v.Version()
		total := int64(0)
		s.Range(func(_ string, e event) bool { total += e.ID; return true })
		if total != keys*10 {
			t.Fatalf("reader saw a half-applied batch: total %d at position %d", total, s.Position())
		}
	}
	wg.Wait()
}

// TestReplaceBuildsSameIndexes: the bulk-built indexes of a snapshot equal those that live
// batches maintain for the same rows.
func TestReplaceBuildsSameIndexes(t *testing.T) {
	live := newEventView(t)
	snap := newEventView(t)
	snap.beginReplace()
	const n = 20000 // several staging chunks, prepared on several goroutines
	for i := range n {
		k := fmt.Sprint(i % 7000)
		val := fmt.Sprintf(`{"id":%d,"sport":"s%d","tags":["t%d","t%d","t%d"]}`, i, i%7, i%5, i%3, i%5)
		switch {
		case i%11 == 0:
			val = "" // tombstone
		case i%13 == 0:
			val = `{bad` // refused by the decoder: hidden, still accounted
		}
		applyBatch(live, int64(i+1), op{k, val})
		snap.stageRow(row{key: k, fullKey: []byte("events|" + k), value: []byte(val), tombstone: val == "", index: int64(i)})
	}
	snap.endReplace(n)
	snap.commit(n)
	if live.Len() != snap.Len() {
		t.Fatalf("len live %d snapshot %d", live.Len(), snap.Len())
	}
	lr, lh := live.epochState()
	sr, sh := snap.epochState()
	if lr != sr || lh != sh {
		t.Fatalf("epoch state live %d %x snapshot %d %x", lr, lh, sr, sh)
	}
	for _, idx := range []string{"sport", "tag"} {
		lv, sv := sorted(live.IndexValues(idx)), sorted(snap.IndexValues(idx))
		if !slices.Equal(lv, sv) {
			t.Fatalf("%s values live %v snapshot %v", idx, lv, sv)
		}
		for _, val := range lv {
			a, b := sorted(live.ByIndexKeys(idx, val)), sorted(snap.ByIndexKeys(idx, val))
			if !slices.Equal(a, b) {
				t.Fatalf("%s=%s: live %d keys, snapshot %d", idx, val, len(a), len(b))
			}
		}
	}
}

// TestAbortReplace: a snapshot dropped mid-way (stream broke) leaves no goroutine behind
// (goleak) and the view untouched.
func TestAbortReplace(t *testing.T) {
	v := newEventView(t)
	applyBatch(v, 1, op{"keep", `{"id":1}`})
	v.beginReplace()
	for i := range 3 * stagedChunk {
		k := fmt.Sprint(i)
		v.stageRow(row{key: k, fullKey: []byte("events|" + k), value: []byte(`{"id":2}`)})
	}
	v.abortReplace()
	if v.Len() != 1 || v.replacing() {
		t.Fatalf("len %d replacing %v", v.Len(), v.replacing())
	}
}

// TestIndexReadsInKeyOrder: ByIndex and ByIndexKeys answer in the order of the key texts
// and IndexValues in the order of the values, whatever the order of the writes and the
// trie's hash (seeded per process, so an order it gave would change between runs): more
// keys than ByIndex's stack buffer, in a shuffled order, with keys that sort differently
// as bytes and as numbers.
func TestIndexReadsInKeyOrder(t *testing.T) {
	v := newEventView(t)
	var keys []string
	for i := range 100 {
		keys = append(keys, fmt.Sprint(i*7%100)) // "0", "7", "14", …: not in byte order
	}
	var ops []op
	for _, k := range keys {
		ops = append(ops, op{k, fmt.Sprintf(`{"id":%s,"sport":"s%d","tags":["all"]}`, k, len(k))})
	}
	applyBatch(v, int64(len(ops)), ops...)
	wantKeys := slices.Sorted(slices.Values(keys))
	if got := v.ByIndexKeys("tag", "all"); !slices.Equal(got, wantKeys) {
		t.Fatalf("ByIndexKeys = %v, want %v", got, wantKeys)
	}
	var got []string
	for _, e := range v.ByIndex("tag", "all") {
		got = append(got, fmt.Sprint(e.ID))
	}
	if !slices.Equal(got, wantKeys) {
		t.Fatalf("ByIndex in the order %v, want the keys' %v", got, wantKeys)
	}
	if got := v.ByIndexKeys("sport", "s2"); len(got) != 90 || !slices.IsSorted(got) {
		t.Fatalf("ByIndexKeys(sport, s2) = %v", got)
	}
	if got := v.IndexValues("sport"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("IndexValues = %v", got)
	}
	if got := v.ByIndex("sport", "none"); got != nil {
		t.Fatalf("ByIndex of a value without objects = %v", got)
	}
}
