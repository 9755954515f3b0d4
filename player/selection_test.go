package player

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/codes"

	"github.com/statecast/statecast/internal/checker"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

func TestSelectionsOfRefused(t *testing.T) {
	cols := func(v string) []string {
		if v == "empty" {
			return nil
		}
		return []string{"g", "id", "name"}
	}
	sel := func(view, filter string, shard, shards uint32) *statecastv1.Selection {
		return &statecastv1.Selection{View: view, Filter: filter, ShardIndex: shard, ShardCount: shards}
	}
	tests := []struct {
		name  string
		views []string
		sels  []*statecastv1.Selection
		want  []string // substrings of the error; nil: accepted
	}{
		{"equality, IN, ranges, null, boolean operators", []string{"a"},
			[]*statecastv1.Selection{sel("a", `g == 1 || g in [2, 3] || (g >= 5 && g < 9) || name == null || !(id != "x")`, 0, 0)}, nil},
		{"a column the view does not have", []string{"a"}, []*statecastv1.Selection{sel("a", `tenant == "x"`, 0, 0)},
			[]string{`view "a"`, "tenant"}},
		{"a syntax error", []string{"a"}, []*statecastv1.Selection{sel("a", `g ==`, 0, 0)}, []string{`view "a"`, "Syntax error"}},
		{"not a bool", []string{"a"}, []*statecastv1.Selection{sel("a", `"text"`, 0, 0)}, []string{`view "a"`, "not a bool"}},
		{"a view not in the Hello's views", []string{"a"}, []*statecastv1.Selection{sel("b", `g == 1`, 0, 0)}, []string{`view "b"`}},
		{"two selections of a view", nil, []*statecastv1.Selection{sel("a", "", 0, 2), sel("a", "", 1, 2)}, []string{`two selections of view "a"`}},
		{"shard index past the count", nil, []*statecastv1.Selection{sel("a", "", 3, 3)}, []string{`view "a"`, "shard_index 3"}},
		{"shard index without count", nil, []*statecastv1.Selection{sel("a", "", 1, 0)}, []string{`view "a"`, "without a shard_count"}},
		{"a filter too long", nil, []*statecastv1.Selection{sel("a", strings.Repeat("g == 1 || ", 500)+"true", 0, 0)}, []string{`view "a"`, "at most"}},
		{"a view with no row yet: parsed only", nil, []*statecastv1.Selection{sel("empty", `anything == 1`, 0, 0)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := selectionsOf(&statecastv1.Hello{Views: tc.views, Selections: tc.sels}, nil, cols)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadHello) {
				t.Fatalf("err = %v, want ErrBadHello", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestSelectionPasses(t *testing.T) {
	sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{
		{View: "a", Filter: `g in [1, 2] && name != null && price > 1.5`},
		{View: "b", ShardIndex: 1, ShardCount: 4},
	}}, map[string]string{"a": `tenant == "t1"`}, func(string) []string { return []string{"g", "name", "price", "tenant"} })
	if err != nil {
		t.Fatal(err)
	}
	row := func(view, key, value string) *rowVals {
		return &rowVals{it: entryItem(&statecastv1.Entry{Index: 1, Key: record.EncodeKey(view, key), Value: []byte(value), View: view})}
	}
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{`{"g":1,"name":"x","price":2.5,"tenant":"t1"}`, true},
		{`{"g":2,"name":"x","price":"2.5","tenant":"t1"}`, false}, // a string does not compare with a number: no pass
		{`{"g":3,"name":"x","price":2.5,"tenant":"t1"}`, false},
		{`{"g":1,"name":null,"price":2.5,"tenant":"t1"}`, false},
		{`{"g":1,"name":"x","price":2.5,"tenant":"t2"}`, false}, // the grant's mandatory filter
		{`{"g":1,"name":"x","price":2.5}`, false},               // a column missing from the row
		{`not json`, false},
	} {
		if got := sels["a"].passes(row("a", "k", tc.value)); got != tc.want {
			t.Errorf("%s: passes = %v, want %v", tc.value, got, tc.want)
		}
	}
	n := 0
	for i := range 4000 {
		k := strconv.Itoa(i)
		got := sels["b"].passes(row("b", k, `{}`))
		if want := xxhash.Sum64String("b|"+k)%4 == 1; got != want {
			t.Fatalf("key %s: shard passes = %v, want %v", k, got, want)
		}
		if got {
			n++
		}
	}
	if n < 900 || n > 1100 {
		t.Errorf("shard 1 of 4 holds %d of 4000 keys", n)
	}
}

// selRow is the value of a row of the selection tests: a group g in 0..9.
func selRow(k string, g int) []byte { return fmt.Appendf(nil, `{"id":%q,"g":%d}`, k, g) }

// produceSel writes n source transactions over views a and b (1 to 6 rows each, keys 0..39,
// a group g in 0..9 that changes, so rows move in and out of the selections; tombstones
// mixed in), each ended by a position record.
func (e *env) produceSel(n int, rnd *rand.Rand) int64 {
	e.t.Helper()
	var msgs []*sarama.ProducerMessage
	views := []string{"a", "b"}
	for range n {
		for range 1 + rnd.IntN(6) {
			v, k := views[rnd.IntN(2)], strconv.Itoa(rnd.IntN(40))
			var value []byte
			if rnd.IntN(8) != 0 {
				value = selRow(k, rnd.IntN(10))
			}
			msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(v, k), value,
				record.Meta{View: v, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), Txn: true}))
		}
		e.lsn += 1 + uint64(rnd.IntN(1000))
		lsn := e.lsnText()
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.PositionKey(),
			(&record.Position{LSN: lsn, Time: time.Now()}).Marshal(),
			record.Meta{Kind: record.KindPosition, SourceTime: time.Now(), SourceLSN: lsn}))
		if rnd.IntN(20) == 0 {
			// An epoch's end counts the whole view: not sent to a target that selects it.
			v := views[rnd.IntN(2)]
			msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.ControlKey(v, record.KindEpochEnd),
				(&record.EpochEnd{Epoch: 1, Rows: 40, Hash: 1, SourceLSN: lsn}).Marshal(),
				record.Meta{View: v, Kind: record.KindEpochEnd, Epoch: 1, SourceTime: time.Now(), SourceLSN: lsn}))
		}
	}
	if err := e.prod.SendMessages(msgs); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range msgs {
		e.last = max(e.last, m.Offset)
	}
	return e.last
}

// groupModel is the checker's model of a filter on g, written in Go (not CEL).
func groupModel(pass func(g int) bool) checker.Selection {
	return func(r checker.Record) bool {
		var row struct{ G int }
		return json.Unmarshal(r.Value, &row) == nil && pass(row.G)
	}
}

// TestSelectionsEveryPath: targets that select rows (a filter; a shard and a filter; one
// view filtered, the other whole) receive exactly their rows, with moves in as rows and
// moves out as tombstones at the index of the change, through every path: the snapshot
// bootstrap, live dispatch, recovery from the player's history, recovery from Kafka, and
// a resync's snapshot. The delivery checker compares each with a Go model of its filter.
func TestSelectionsEveryPath(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	rnd := newRand(23)
	e.produceSel(200, rnd)

	fa := newClient("fa", e.chk, "a")
	fa.sels = []*statecastv1.Selection{{View: "a", Filter: "g < 3 || g == 7"}}
	fa.model = map[string]checker.Selection{"a": groupModel(func(g int) bool { return g < 3 || g == 7 })}
	sb := newClient("sb", e.chk, "b")
	sb.sels = []*statecastv1.Selection{{View: "b", Filter: "g != 5", ShardIndex: 1, ShardCount: 3}}
	sb.model = map[string]checker.Selection{"b": func(r checker.Record) bool {
		return xxhash.Sum64String(r.Key)%3 == 1 && groupModel(func(g int) bool { return g != 5 })(r)
	}}
	mix := newClient("mix", e.chk)
	mix.sels = []*statecastv1.Selection{{View: "a", Filter: "g >= 5", Columns: []string{"g"}}}
	mix.entryCheck = func(en *statecastv1.Entry) string {
		// View a's rows come cut to the column g; view b's whole.
		switch {
		case en.Kind != statecastv1.Kind_KIND_ROW || en.Tombstone:
		case en.View == "a" && !bytes.HasPrefix(en.Value, []byte(`{"g":`)):
			return fmt.Sprintf("view a's row %s, want only its column g", en.Value)
		case en.View == "b" && !bytes.HasPrefix(en.Value, []byte(`{"id":`)):
			return fmt.Sprintf("view b's row %s, want it whole", en.Value)
		}
		return ""
	}
	mix.model = map[string]checker.Selection{"a": groupModel(func(g int) bool { return g >= 5 })}
	whole := newClient("whole", e.chk, "a")
	// Filters the dispatcher indexes by their equality part (filterindex.go).
	eq := newClient("eq", e.chk, "a", "b")
	eq.sels = []*statecastv1.Selection{{View: "a", Filter: `g in [1, 8] && id != "3"`}, {View: "b", Filter: "4 == g"}}
	eq.model = map[string]checker.Selection{
		"a": func(r checker.Record) bool {
			var row struct {
				ID string
				G  int
			}
			return json.Unmarshal(r.Value, &row) == nil && (row.G == 1 || row.G == 8) && row.ID != "3"
		},
		"b": groupModel(func(g int) bool { return g == 4 }),
	}
	selectionPaths(t, e, rnd, []*client{fa, sb, mix, whole, eq}, nil, func(p *Player) {
		// The status page says what each target selects.
		if got := targetStatus(p, "sb").Selections; len(got) != 1 || got["b"] != "g != 5 shard 1/3" {
			t.Errorf("status of sb: selections %v", got)
		}
		if got := targetStatus(p, "mix").Selections["a"]; got != "g >= 5 columns g" {
			t.Errorf("status of mix: selection %q", got)
		}
		if got := targetStatus(p, "whole").Selections; got != nil {
			t.Errorf("status of whole: selections %v", got)
		}
	})
	if len(mix.entryErrs) > 0 || mix.rowsGot == 0 {
		t.Errorf("mix: %d rows, %v", mix.rowsGot, mix.entryErrs)
	}
	t.Logf("row entries (tombstones): filtered %d (%d), whole %d (%d)", fa.rowsGot, fa.tombsGot, whole.rowsGot, whole.tombsGot)
	if fa.rowsGot >= whole.rowsGot*3/4 {
		t.Errorf("the filtered target received %d row entries, the whole view's %d: the filter let too much through", fa.rowsGot, whole.rowsGot)
	}
}

// selectionPaths runs clients through every path of the player (a snapshot bootstrap and
// live, a recovery from the history, one from Kafka, a resync), each player made with mod,
// and checks every delivery with the checker.
func selectionPaths(t *testing.T, e *env, rnd *rand.Rand, clients []*client, mod func(*Config), live func(*Player)) {
	t.Helper()
	caughtUp := func(c *client) func() bool {
		last := e.lastOffset()
		return func() bool { return c.Applied() >= last }
	}

	// The snapshot bootstrap, then live: sessions run while transactions are produced.
	tp := startPlayer(t, e, mod)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.session(ctx, tp.addr, 0, nil); err != nil {
				t.Errorf("%s: %v", c.id, err)
			}
		}()
	}
	for _, c := range clients {
		waitFor(t, 60*time.Second, c.id+" to take its snapshot", caughtUp(c))
	}
	for range 10 {
		e.produceSel(30, rnd)
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range clients {
		waitFor(t, 60*time.Second, c.id+" to catch up live", caughtUp(c))
	}
	if live != nil {
		live(tp.p)
	}
	cancel()
	wg.Wait()

	// Recovery from the player's history: the targets resume after records they missed.
	e.produceSel(200, rnd)
	for _, c := range clients {
		sessionUntil(t, c, tp.addr, 60*time.Second, caughtUp(c))
	}

	// Recovery from Kafka: a player that keeps no history.
	tp.stop()
	e.produceSel(200, rnd)
	tp = startPlayer(t, e, func(c *Config) {
		if mod != nil {
			mod(c)
		}
		c.HistoryBytes = 1
	})
	for _, c := range clients {
		sessionUntil(t, c, tp.addr, 60*time.Second, caughtUp(c))
	}

	// A resync: a resume index past the log's end gets ResyncRequired and a snapshot.
	e.produceSel(100, rnd)
	for _, c := range clients {
		c.mu.Lock()
		c.applied = 1_000_000
		c.mu.Unlock()
		last := e.lastOffset()
		sessionUntil(t, c, tp.addr, 60*time.Second, func() bool { a := c.Applied(); return a >= last && a < 1_000_000 })
		if len(c.resyncs) != 1 {
			t.Errorf("%s: resyncs %v, want one", c.id, c.resyncs)
		}
	}
	e.check()
}

// TestGrantFilterEveryPath: an access rule's mandatory filter restricts what its principal
// receives through every path, whether the client selects nothing (a client of protocol
// version 1: served as before, within its grant) or selects rows itself (both filters
// apply); a principal granted the view without a filter as well receives it whole. A
// filtered grant refuses a Hello of every view, and a grant's filter that names a column
// the view does not have is refused naming it.
func TestGrantFilterEveryPath(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	rnd := newRand(29)
	e.produceSel(200, rnd)
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"tenant": "tok-tenant-0123456789", "both": "tok-both-0123456789", "bad": "tok-bad-0123456789"})
	mod := func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.Access = []Grant{
			{Principals: []string{"tenant", "both"}, Streams: []string{"s"}, Views: []string{"a"}, Filter: "g < 4"},
			{Principals: []string{"both"}, Streams: []string{"s"}, Views: []string{"a"}},
			{Principals: []string{"bad"}, Streams: []string{"s"}, Views: []string{"a"}, Filter: `tenant_id == "t1"`},
		}
	}
	old := newClient("old", e.chk, "a") // no selection of its own
	old.dial = sec.dial("tok-tenant-0123456789", nil)
	old.model = map[string]checker.Selection{"a": groupModel(func(g int) bool { return g < 4 })}
	own := newClient("own", e.chk, "a")
	own.dial = sec.dial("tok-tenant-0123456789", nil)
	own.sels = []*statecastv1.Selection{{View: "a", Filter: "g >= 2"}}
	own.model = map[string]checker.Selection{"a": groupModel(func(g int) bool { return g >= 2 && g < 4 })}
	both := newClient("both", e.chk, "a")
	both.dial = sec.dial("tok-both-0123456789", nil)
	selectionPaths(t, e, rnd, []*client{old, own, both}, mod, func(p *Player) {
		if got := targetStatus(p, "own").Selections["a"]; got != "(g < 4) && (g >= 2)" {
			t.Errorf("status of own: selection %q, want the grant's filter and its own", got)
		}
	})
	if old.rowsGot >= both.rowsGot*3/4 {
		t.Errorf("the granted target received %d row entries, the whole view's %d: the grant's filter let too much through", old.rowsGot, both.rowsGot)
	}

	tp := startPlayer(t, e, mod)
	_, err := subscribe(t, tp.addr, sec.dial("tok-tenant-0123456789", nil), helloOf("every"))
	wantCode(t, "every view under a filtered grant", err, codes.PermissionDenied, "name the views")
	_, err = subscribe(t, tp.addr, sec.dial("tok-bad-0123456789", nil), helloOf("bad", "a"))
	wantCode(t, "a grant's filter on a column the view does not have", err, codes.InvalidArgument, `view "a"`, "tenant_id")
}

func TestGrantFilterConfig(t *testing.T) {
	c := Config{Access: []Grant{{Principals: []string{"p"}, Streams: []string{"s"}, Views: []string{"a"}, Filter: "g =="}}}
	errs := c.checkAccess()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "access[0].filter") {
		t.Fatalf("checkAccess = %v, want the filter named", errs)
	}
	a := &access{grants: []Grant{
		{Principals: []string{"p"}, Streams: []string{"s"}, Views: []string{"a", "b"}, Filter: `t == "1"`},
		{Principals: []string{"p"}, Streams: []string{"s"}, Views: []string{"a"}, Filter: `t == "2"`},
		{Principals: []string{"p"}, Streams: []string{"s"}, Views: []string{"c"}},
	}}
	m, err := a.mandatory(Principal{Name: "p"}, "s", []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `(t == "1") || (t == "2")`, "b": `t == "1"`}
	if len(m) != len(want) || m["a"] != want["a"] || m["b"] != want["b"] {
		t.Fatalf("mandatory = %v, want %v", m, want)
	}
}

func TestProjectValue(t *testing.T) {
	keep := map[string]bool{"b": true, `q"x`: true, "d": true}
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":"two","c":[1,{"b":2}],"d":{"e":null}}`, `{"b":"two","d":{"e":null}}`},
		{`{"q\"x":1,"a":2}`, `{"q\"x":1}`},
		{`{"a":1}`, `{}`},
		{`[1,2]`, `[1,2]`},
	} {
		if got := string(projectValue([]byte(tc.in), keep)); got != tc.want {
			t.Errorf("projectValue(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	_, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "a", Columns: []string{"g", "nope"}}}}, nil,
		func(string) []string { return []string{"g", "id"} })
	if !errors.Is(err, ErrBadHello) || !strings.Contains(err.Error(), `view "a" has no column "nope"`) {
		t.Fatalf("an unknown column: %v", err)
	}
}

// TestFilterIndexRandom: the dispatcher's index of selections (viewIndex.candidates) never
// leaves out a target that has something to receive: for random filters (indexed by an
// equality or IN part, by a shard, or scanned) and random row changes (updates, creates,
// deletes, rows missing the column), every target to which choose gives an entry is a
// candidate, and no candidate comes twice. The seed is printed.
func TestFilterIndexRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := newRand(seed)
	cols := func(string) []string { return []string{"g", "h", "id"} }
	filters := []func() string{
		func() string { return fmt.Sprintf("g == %d", rnd.IntN(5)) },
		func() string { return fmt.Sprintf("%d.0 == g", rnd.IntN(5)) },
		func() string { return fmt.Sprintf("g in [%d, %d] && h != %d", rnd.IntN(5), rnd.IntN(5), rnd.IntN(3)) },
		func() string { return fmt.Sprintf(`h > %d && id == "%d"`, rnd.IntN(3), rnd.IntN(6)) },
		func() string { return fmt.Sprintf("g == %d || h == %d", rnd.IntN(5), rnd.IntN(3)) },
		func() string { return fmt.Sprintf("g == %d || g == %d", rnd.IntN(5), rnd.IntN(5)) },
		func() string {
			return fmt.Sprintf("(g == %d && h != %d) || g in [%d, %d] || (h > 0 && %d == g)", rnd.IntN(5), rnd.IntN(3), rnd.IntN(5), rnd.IntN(5), rnd.IntN(5))
		},
		func() string {
			return fmt.Sprintf("g == %d || (h == %d && g == %d)", rnd.IntN(5), rnd.IntN(3), rnd.IntN(5))
		},
		func() string { return "h == null" },
		func() string { return "" },
	}
	x := newViewIndex()
	var sels []*selection
	var targets []*target
	for i := range 200 {
		h := &statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "a", Filter: filters[rnd.IntN(len(filters))]()}}}
		if rnd.IntN(3) == 0 {
			h.Selections[0].ShardCount = uint32(1 + rnd.IntN(4))
			h.Selections[0].ShardIndex = uint32(rnd.IntN(int(h.Selections[0].ShardCount)))
		}
		if h.Selections[0].Filter == "" && h.Selections[0].ShardCount == 0 {
			h.Selections[0].Filter = "true"
		}
		m, err := selectionsOf(h, nil, cols)
		if err != nil {
			t.Fatal(err)
		}
		tg := &target{id: strconv.Itoa(i), sels: []*selection{m["a"]}}
		x.add(tg, m["a"])
		sels, targets = append(sels, m["a"]), append(targets, tg)
	}
	// Remove some, in random order (a key's first target among them), and add half of
	// them again: the index stays exact.
	gone := map[int]bool{}
	for _, i := range rnd.Perm(len(targets))[:60] {
		x.remove(targets[i], sels[i])
		gone[i] = true
	}
	for i := range gone {
		if rnd.IntN(2) == 0 {
			x.add(targets[i], sels[i])
			delete(gone, i)
		}
	}
	live := func(i int) bool { return !gone[i] }
	row := func(idx int64, key string) *item {
		var v []byte
		switch rnd.IntN(6) {
		case 0: // tombstone
		case 1:
			v = fmt.Appendf(nil, `{"id":%q}`, key) // no g, no h
		case 2:
			v = fmt.Appendf(nil, `{"g":%d.0,"h":null,"id":%q}`, rnd.IntN(5), key)
		default:
			v = fmt.Appendf(nil, `{"g":%d,"h":%d,"id":%q}`, rnd.IntN(5), rnd.IntN(3), key)
		}
		return entryItem(&statecastv1.Entry{Index: idx, View: "a", Key: record.EncodeKey("a", key), Value: v, Tombstone: v == nil})
	}
	for n := range 3000 {
		key := strconv.Itoa(rnd.IntN(6))
		cur := &rowVals{it: row(int64(2*n+1), key)}
		var prev *rowVals
		if p := row(int64(2*n), key); !p.tombstone && rnd.IntN(4) != 0 {
			prev = &rowVals{it: p}
		}
		got := map[*target]int{}
		x.candidates(cur, prev, func(t *target) { got[t]++ })
		for i, tg := range targets {
			if got[tg] > 1 {
				t.Fatalf("change %d: target %d (%q) a candidate %d times", n, i, sels[i].String(), got[tg])
			}
			if !live(i) {
				if got[tg] > 0 {
					t.Fatalf("change %d: removed target %d is a candidate", n, i)
				}
				continue
			}
			sel := sels[i]
			want := sel.choose(cur, func() bool { return prev != nil && sel.passes(prev) }) != nil
			if want && got[tg] == 0 {
				t.Fatalf("change %d: target %d (%q) left out for %s (previous %v)", n, i, sel.String(), cur.it.value(), prev != nil)
			}
		}
	}
	indexed := 0
	for _, sel := range sels {
		if sel.eq != nil {
			indexed++
		}
	}
	if indexed < 50 || len(x.scan) == 0 || len(x.shards) == 0 {
		t.Fatalf("%d of %d selections indexed by value, %d scanned, %d shard counts: the test covers too little", indexed, len(sels), len(x.scan), len(x.shards))
	}
}

// TestEqPartOf: which part of a filter the index uses.
func TestEqPartOf(t *testing.T) {
	for _, tc := range []struct{ filter, want string }{
		{`g == 1`, "g [n1]"},
		{`h > 2 && g in [1, "x"]`, "g [n1 sx]"},
		{`g == 1 || g == 2`, "g [n1 n2]"},
		{`g == 1 || (h == 2 && g == 3) || g in [4, 5]`, "g [n1 n3 n4 n5]"},
		{`g == 1 || h == 2`, ""},
		{`g == 1 || h > 2`, ""},
		{`(g == 1 || g == 2) && h == 3`, "g [n1 n2]"},
		{`!(g == 1)`, ""},
	} {
		m, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "a", Filter: tc.filter}}}, nil,
			func(string) []string { return []string{"g", "h"} })
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		got := ""
		if p := m["a"].eq; p != nil {
			got = fmt.Sprintf("%s %v", p.col, p.vals)
		}
		if got != tc.want {
			t.Errorf("%s: indexed by %q, want %q", tc.filter, got, tc.want)
		}
	}
}

// TestExactFilterIsCEL: a filter that is one equality or IN (selection.exact) is decided
// without CEL, from the column's index key; CEL's own evaluation of the same filter is the
// oracle, over literals and row values of every type the record format carries (ints and
// doubles of one value, large ones, strings that look like numbers, null, bools, lists,
// maps, a missing column).
func TestExactFilterIsCEL(t *testing.T) {
	lits := []string{`"a"`, `"1"`, `1`, `1.0`, `1.5`, `-3`, `true`, `null`, `1e18`, `1000000000000000000`,
		`9223372036854775807`, `9.3e18`, `18446744073709551615u`, `2u`, `0`, `-0.0`}
	vals := []string{`"a"`, `"1"`, `1`, `1.0`, `1.5`, `-3`, `-3.0`, `true`, `false`, `null`, `1e18`, `1000000000000000000`,
		`9223372036854775807`, `9300000000000000000`, `18446744073709551615`, `2`, `0`, `-0.0`, `[1]`, `{"x":1}`, ``}
	cols := func(string) []string { return []string{"k", "other"} }
	rnd := newRand(41)
	exact := 0
	for range 3000 {
		var filter string
		switch rnd.IntN(3) {
		case 0:
			filter = "k == " + lits[rnd.IntN(len(lits))]
		case 1:
			filter = lits[rnd.IntN(len(lits))] + " == k"
		default:
			n := 1 + rnd.IntN(3)
			var in []string
			for range n {
				in = append(in, lits[rnd.IntN(len(lits))])
			}
			filter = "k in [" + strings.Join(in, ", ") + "]"
		}
		sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "v", Filter: filter}}}, nil, cols)
		if err != nil {
			t.Fatalf("%s: %v", filter, err)
		}
		sel := sels["v"]
		if !sel.exact {
			continue
		}
		exact++
		prog, _, err := compileFilter(filter, cols("v"))
		if err != nil {
			t.Fatal(err)
		}
		oracle := &selection{view: "v", filter: filter, prog: prog}
		v := vals[rnd.IntN(len(vals))]
		value := `{"other":1}`
		if v != "" {
			value = `{"k":` + v + `,"other":1}`
		}
		it := entryItem(&statecastv1.Entry{Index: 1, View: "v", Key: record.EncodeKey("v", "1"), Value: []byte(value)})
		if got, want := sel.passes(&rowVals{it: it}), oracle.passes(&rowVals{it: it}); got != want {
			t.Errorf("filter %s, row %s: the exact path says %v, CEL %v", filter, value, got, want)
		}
	}
	if exact < 1200 { // a literal beyond ±2^53 is not indexed (exactNumber): about half of these
		t.Errorf("only %d of 3000 filters were taken as exact", exact)
	}
	for _, f := range []string{`k == "a" && other == 1`, `k == "a" || k == "b"`, `k != "a"`, `k == other`, `!(k == "a")`} {
		sels, err := selectionsOf(&statecastv1.Hello{Selections: []*statecastv1.Selection{{View: "v", Filter: f}}}, nil, cols)
		if err != nil {
			t.Fatal(err)
		}
		if sels["v"].exact || sels["v"].prog == nil {
			t.Errorf("%s: taken as exact", f)
		}
	}
}
