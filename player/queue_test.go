package player

import (
	"fmt"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

func ent(i int64) *item { return &item{index: i, wire: make([]byte, 10)} }

func indexes(items []*item) []int64 {
	var out []int64
	for _, it := range items {
		out = append(out, it.index)
	}
	return out
}

func TestQueueStateMachine(t *testing.T) {
	type step struct {
		op        string // pushN, pushC, done, pop, suspend, restart
		idx       int64
		term      uint64
		wantOK    bool
		wantState State
		wantFront int64 // -1 = nil
	}
	tests := []struct {
		name  string
		start State
		steps []step
	}{
		{"normal push and pop", StateN, []step{
			{op: "pushN", idx: 1, term: 1, wantOK: true, wantState: StateN, wantFront: 1},
			{op: "pushN", idx: 3, term: 1, wantOK: true, wantState: StateN, wantFront: 1},
			{op: "pop", wantState: StateN, wantFront: 3},
			{op: "pop", wantState: StateN, wantFront: -1},
		}},
		{"stale term dropped", StateN, []step{
			{op: "pushN", idx: 1, term: 0, wantOK: false, wantState: StateN, wantFront: -1},
			{op: "pushN", idx: 1, term: 2, wantOK: false, wantState: StateN, wantFront: -1},
		}},
		{"RF serves catch-up only, normal waits", StateRF, []step{
			{op: "pushN", idx: 10, term: 1, wantOK: true, wantState: StateRF, wantFront: -1},
			{op: "pushC", idx: 5, term: 1, wantOK: true, wantState: StateRF, wantFront: 5},
			{op: "pop", wantState: StateRF, wantFront: -1},
			{op: "pushC", idx: 7, term: 1, wantOK: true, wantState: StateRF, wantFront: 7},
			{op: "done", term: 1, wantOK: true, wantState: StateFC, wantFront: 7},
			{op: "pop", wantState: StateN, wantFront: 10}, // FC -> N when catch-up drains
			{op: "pop", wantState: StateN, wantFront: -1},
		}},
		{"fetchingCompleted with empty catch-up goes to N", StateRF, []step{
			{op: "pushN", idx: 4, term: 1, wantOK: true, wantState: StateRF, wantFront: -1},
			{op: "done", term: 1, wantOK: true, wantState: StateN, wantFront: 4},
		}},
		{"fetchingCompleted with stale term ignored", StateRF, []step{
			{op: "done", term: 0, wantOK: false, wantState: StateRF, wantFront: -1},
		}},
		{"fetchingCompleted outside RF ignored", StateN, []step{
			{op: "done", term: 1, wantOK: false, wantState: StateN, wantFront: -1},
		}},
		{"suspend clears and rejects pushes of old term", StateRF, []step{
			{op: "pushN", idx: 9, term: 1, wantOK: true, wantState: StateRF, wantFront: -1},
			{op: "pushC", idx: 3, term: 1, wantOK: true, wantState: StateRF, wantFront: 3},
			{op: "suspend", wantState: StateS, wantFront: -1},
			{op: "pushC", idx: 4, term: 1, wantOK: false, wantState: StateS, wantFront: -1},
			{op: "pushN", idx: 10, term: 2, wantOK: false, wantState: StateS, wantFront: -1}, // S rejects even the new term
			{op: "done", term: 2, wantOK: false, wantState: StateS, wantFront: -1},
		}},
		{"restart: new term, old recovery pushes dropped", StateN, []step{
			{op: "pushN", idx: 1, term: 1, wantOK: true, wantState: StateN, wantFront: 1},
			{op: "restart", wantState: StateRF, wantFront: -1},
			{op: "pushC", idx: 2, term: 1, wantOK: false, wantState: StateRF, wantFront: -1},
			{op: "pushC", idx: 2, term: 2, wantOK: true, wantState: StateRF, wantFront: 2},
			{op: "done", term: 1, wantOK: false, wantState: StateRF, wantFront: 2},
			{op: "done", term: 2, wantOK: true, wantState: StateFC, wantFront: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(1, tc.start)
			for i, s := range tc.steps {
				var ok bool
				switch s.op {
				case "pushN":
					ok = q.push(ent(s.idx), true, s.term)
				case "pushC":
					ok = q.push(ent(s.idx), false, s.term)
				case "done":
					ok = q.fetchingCompleted(s.term)
				case "pop":
					ok = q.pop() != nil
					s.wantOK = true
				case "suspend":
					q.suspend()
					ok, s.wantOK = true, true
				case "restart":
					q.restart(q.term + 1)
					ok, s.wantOK = true, true
				}
				if ok != s.wantOK {
					t.Fatalf("step %d %s: ok=%v want %v", i, s.op, ok, s.wantOK)
				}
				if q.state != s.wantState {
					t.Fatalf("step %d %s: state %s want %s", i, s.op, q.state, s.wantState)
				}
				f := q.front()
				got := int64(-1)
				if f != nil {
					got = f.index
				}
				if got != s.wantFront {
					t.Fatalf("step %d %s: front %d want %d", i, s.op, got, s.wantFront)
				}
			}
		})
	}
}

func TestQueueBatching(t *testing.T) {
	q := newQueue(1, StateN)
	for _, i := range []int64{1, 2, 4, 7, 8, 9} { // gaps: never index+1
		q.push(ent(i), true, 1)
	}
	b := q.nextBatch(2, 1<<20, nil, time.Time{})
	if got := indexes(b); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("batch by entries: %v", got)
	}
	b = q.nextBatch(10, int64(2*ent(0).size()), nil, time.Time{})
	if got := indexes(b); len(got) != 2 || got[0] != 4 || got[1] != 7 {
		t.Fatalf("batch by bytes: %v", got)
	}
	b = q.nextBatch(10, 1, nil, time.Time{}) // at least one entry even if larger than maxBytes
	if got := indexes(b); len(got) != 1 || got[0] != 8 {
		t.Fatalf("oversized entry: %v", got)
	}
	if len(q.popped) != 3 || q.poppedBytes == 0 {
		t.Fatalf("popped %d bytes %d", len(q.popped), q.poppedBytes)
	}
	q.ack(5) // releases batches with last <= 5: {1,2}
	if len(q.popped) != 2 || q.popped[0].last != 7 {
		t.Fatalf("after ack 5: %+v", q.popped)
	}
	q.ack(8)
	if len(q.popped) != 0 || q.poppedBytes != 0 {
		t.Fatalf("after ack 8: %+v bytes %d", q.popped, q.poppedBytes)
	}
	// A frame is always alone in its batch.
	fr := frameItem(20, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 20}}})
	q.push(fr, true, 1)
	q.push(ent(21), true, 1)
	if b = q.nextBatch(10, 1<<20, nil, time.Time{}); len(b) != 1 || b[0].index != 9 {
		t.Fatalf("batch before frame: %v", indexes(b))
	}
	if b = q.nextBatch(10, 1<<20, nil, time.Time{}); len(b) != 1 || b[0] != fr {
		t.Fatalf("frame batch: %v", indexes(b))
	}
	if b = q.nextBatch(10, 1<<20, nil, time.Time{}); len(b) != 1 || b[0].index != 21 {
		t.Fatalf("after frame: %v", indexes(b))
	}
	if b = q.nextBatch(10, 1<<20, nil, time.Time{}); len(b) != 0 {
		t.Fatalf("empty: %v", indexes(b))
	}
}

// TestQueueSentBatches: the popped accounting changes only through the queue's methods:
// nextBatch records the batch as sent at now, untrackLast forgets it, restart (a resync)
// keeps what is on the wire, suspend releases everything.
func TestQueueSentBatches(t *testing.T) {
	q := newQueue(1, StateN)
	for _, i := range []int64{1, 2, 3} {
		q.push(ent(i), true, 1)
	}
	at := time.Unix(100, 0)
	q.nextBatch(1, 1<<20, nil, at)
	q.nextBatch(1, 1<<20, nil, at.Add(time.Second))
	if len(q.popped) != 2 || !q.popped[0].sentAt.Equal(at) || !q.popped[1].sentAt.Equal(at.Add(time.Second)) {
		t.Fatalf("popped %+v", q.popped)
	}
	q.untrackLast()
	if len(q.popped) != 1 || q.popped[0].last != 1 || q.poppedBytes != int64(ent(0).size()) {
		t.Fatalf("after untrackLast: %+v bytes %d", q.popped, q.poppedBytes)
	}
	q.restart(2)
	if q.state != StateRF || q.term != 2 || q.normal.len() != 0 || len(q.popped) != 1 {
		t.Fatalf("after restart: state %s term %d normal %d popped %d", q.state, q.term, q.normal.len(), len(q.popped))
	}
	q.push(ent(4), true, 2)
	q.dropNormal()
	if q.normal.len() != 0 || q.normal.bytes != 0 || q.state != StateRF {
		t.Fatalf("after dropNormal: normal %d bytes %d state %s", q.normal.len(), q.normal.bytes, q.state)
	}
	q.suspend()
	if q.state != StateS || len(q.popped) != 0 || q.poppedBytes != 0 {
		t.Fatalf("after suspend: state %s popped %+v bytes %d", q.state, q.popped, q.poppedBytes)
	}
}

// TestQueueRefetch: refetch moves N or FC back to RF in the same term, keeping the
// catch-up queue in front (the byte budget's way back to recovery).
func TestQueueRefetch(t *testing.T) {
	q := newQueue(1, StateRF)
	q.push(ent(5), false, 1)
	q.push(ent(9), true, 1)
	q.fetchingCompleted(1) // FC: 5 is still to send
	q.refetch()
	if q.state != StateRF || q.term != 1 || q.front().index != 5 {
		t.Fatalf("state %s term %d front %v", q.state, q.term, q.front())
	}
	q.push(ent(7), false, 1)
	if !q.fetchingCompleted(1) || q.state != StateFC {
		t.Fatalf("fetchingCompleted after refetch: state %s", q.state)
	}
	var got []int64
	for q.front() != nil {
		got = append(got, q.pop().index)
	}
	if fmt.Sprint(got) != "[5 7 9]" || q.state != StateN {
		t.Fatalf("sent %v, state %s", got, q.state)
	}
}

// TestQueueBatchingCutsAtTxnEnd: a batch that reaches its bound is cut after its last
// position entry when source-transaction entries follow it, also across the FC → N switch;
// a batch that is not full, or whose tail is not a transaction, is not cut; a transaction
// larger than a batch still goes out, batch by batch.
func TestQueueBatchingCutsAtTxnEnd(t *testing.T) {
	txn := func(i int64) *item { it := ent(i); it.txn = true; return it }
	pos := func(i int64) *item { it := ent(i); it.kind = statecastv1.Kind_KIND_POSITION; return it }
	row := ent
	type step struct {
		max  int
		want []int64
	}
	tests := []struct {
		name  string
		items []*item
		steps []step
	}{
		{"cut after the position", []*item{txn(1), txn(2), pos(3), txn(4), txn(5), txn(6), pos(7)},
			[]step{{5, []int64{1, 2, 3}}, {5, []int64{4, 5, 6, 7}}}},
		{"last of two positions", []*item{txn(1), pos(2), txn(3), pos(4), txn(5), txn(6), pos(7)},
			[]step{{5, []int64{1, 2, 3, 4}}, {5, []int64{5, 6, 7}}}},
		{"not full: no cut", []*item{txn(1), pos(2), txn(3)}, []step{{5, []int64{1, 2, 3}}}},
		{"rows without txn after the position: no cut", []*item{txn(1), pos(2), row(3), row(4), row(5)},
			[]step{{3, []int64{1, 2, 3}}, {3, []int64{4, 5}}}},
		{"transaction larger than a batch", []*item{txn(1), txn(2), txn(3), txn(4), txn(5), pos(6)},
			[]step{{2, []int64{1, 2}}, {2, []int64{3, 4}}, {2, []int64{5, 6}}}},
		{"ends exactly at the position", []*item{txn(1), txn(2), pos(3), txn(4)}, []step{{3, []int64{1, 2, 3}}, {3, []int64{4}}}},
		{"position first, then a transaction", []*item{pos(1), txn(2), txn(3), txn(4)}, []step{{3, []int64{1}}, {3, []int64{2, 3, 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(1, StateN)
			for _, it := range tt.items {
				q.push(it, true, 1)
			}
			for i, s := range tt.steps {
				b := q.nextBatch(s.max, 1<<20, nil, time.Time{})
				if got := indexes(b); fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Fatalf("batch %d: %v, want %v", i, got, s.want)
				}
			}
			var bytes int64
			for _, p := range q.popped {
				bytes += p.bytes
			}
			if q.normal.len() != 0 || bytes != q.poppedBytes || bytes != int64(len(tt.items)*ent(0).size()) {
				t.Fatalf("left %d items, popped bytes %d (sum %d)", q.normal.len(), q.poppedBytes, bytes)
			}
		})
	}
	// By bytes, and across the catch-up → normal switch of FC.
	q := newQueue(1, StateRF)
	q.push(txn(1), false, 1)
	q.push(pos(2), false, 1)
	q.push(txn(3), true, 1)
	q.push(txn(4), true, 1)
	q.push(pos(5), true, 1)
	q.fetchingCompleted(1)
	if b := q.nextBatch(10, int64(3*ent(0).size()), nil, time.Time{}); fmt.Sprint(indexes(b)) != "[1 2]" {
		t.Fatalf("FC batch by bytes: %v", indexes(b))
	}
	if b := q.nextBatch(10, 1<<20, nil, time.Time{}); fmt.Sprint(indexes(b)) != "[3 4 5]" || q.state != StateN {
		t.Fatalf("then %v in %v", indexes(b), q.state)
	}
}

// TestQueueBatchingCutsAtEntryBound: a batch of exactly maxEntries entries has reached its
// bound even when nothing follows it yet.
func TestQueueBatchingCutsAtEntryBound(t *testing.T) {
	q := newQueue(1, StateN)
	pos := ent(2)
	pos.kind = statecastv1.Kind_KIND_POSITION
	txn := ent(3)
	txn.txn = true
	q.push(ent(1), true, 1)
	q.push(pos, true, 1)
	q.push(txn, true, 1)
	if b := q.nextBatch(3, 1<<20, nil, time.Time{}); fmt.Sprint(indexes(b)) != "[1 2]" {
		t.Fatalf("batch %v, want [1 2]", indexes(b))
	}
}
