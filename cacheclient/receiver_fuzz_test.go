package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"google.golang.org/grpc"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// ackSink is the receiver's stream with acks swallowed: the fuzzer drives the receiver
// directly and never reads from it.
type ackSink struct {
	grpc.BidiStreamingClient[statecastv1.SubscribeRequest, frame]
	acked int64
}

func (s *ackSink) Send(m *statecastv1.SubscribeRequest) error {
	s.acked = m.GetAck().GetIndex()
	return nil
}

// FuzzReceiverFrames drives the receiver with frames in any order — live batches,
// progress, snapshot begin/rows/end, resync, position entries, indexes in and out of
// order, keys of the wrong view — as a player (or a broken one) could send them. Each
// input is a program of two-byte instructions. After every frame: the receiver never
// panics; a frame it refuses changes nothing published (the session is then aborted and a
// new one resumes, as the connection loop does); the applied position never goes back
// except through a snapshot; and when no snapshot or transaction is open, every view
// holds exactly the rows of the model.
func FuzzReceiverFrames(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2})                            // three live rows
	f.Add([]byte{2, 4, 3, 0, 3, 1, 4, 4, 0, 5})                // snapshot at 4, two rows, end, live
	f.Add([]byte{5, 0, 2, 3, 3, 2, 4, 3, 1, 2})                // resync, snapshot, progress
	f.Add([]byte{0, 0x81, 0, 0x40, 6, 0, 2, 1, 0, 0x20, 4, 1}) // out-of-order, foreign key, position
	f.Add([]byte{2, 2, 2, 2, 4, 9, 3, 0, 4, 2})                // nested begin, bad end
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 256 {
			prog = prog[:256]
		}
		c := newTestClient(t)
		views := []string{"a", "b"}
		vs := make([]*View[string], len(views))
		for i, name := range views {
			v, err := Register(c, name, func(_ string, value []byte) (string, error) { return string(value), nil })
			if err != nil {
				t.Fatal(err)
			}
			vs[i] = v
		}
		ctx := context.Background()
		newSession := func() *receiver {
			return &receiver{c: c, stream: &ackSink{}, resumed: c.applied.Load() >= 0, staged: -1, readyAt: -1}
		}
		r := newSession()
		model := map[string]map[string]string{"a": {}, "b": {}}
		var snapModel map[string]map[string]string // the snapshot's views while one is open
		next := int64(0)                           // the next live index the instructions aim at
		for pc := 0; pc+1 < len(prog); pc += 2 {
			op, arg := prog[pc]%7, prog[pc+1]
			view := views[arg&1]
			key := fmt.Sprint((arg >> 1) & 3)
			applied := c.applied.Load()
			var msg frame
			var rows func(m map[string]map[string]string) // what the frame does to the model
			switch op {
			case 0, 6: // a batch of one row (6: a position entry); in a snapshot, a snapshot row
				idx := next
				switch {
				case arg&0x80 != 0:
					idx = int64(arg & 0x3f) // anywhere: often out of order
				case r.inSnapshot:
					idx = min(r.snapLast+1, r.snapIndex)
				}
				e := entry{index: idx, view: view, kind: statecastv1.Kind_KIND_ROW, key: record.EncodeKey(view, key)}
				if arg&0x40 != 0 {
					e.key = record.EncodeKey(views[1-arg&1], key) // a key of the other view
				}
				value := fmt.Sprint(idx)
				if arg&0x20 != 0 {
					e.tombstone = true
				} else {
					e.value = []byte(value)
				}
				if op == 6 {
					e = entry{index: idx, view: view, kind: statecastv1.Kind_KIND_POSITION, value: []byte(`{"lsn":"0/1"}`)}
				} else {
					rows = func(m map[string]map[string]string) {
						if e.tombstone {
							delete(m[view], key)
						} else {
							m[view][key] = value
						}
					}
				}
				msg = frame{kind: frameBatch, entries: []entry{e}}
				if !r.inSnapshot {
					next = max(next, idx) + 1
				}
			case 1:
				msg = frame{kind: frameProgress, index: max(applied, 0) + int64(arg%3) - 1}
			case 2:
				msg = frame{kind: frameSnapshotBegin, index: max(applied, 0) + int64(arg%4)}
				if arg&0x10 != 0 {
					msg.views = []string{view}
				}
			case 3, 4:
				msg = frame{kind: frameSnapshotEnd, index: r.snapIndex}
				if op == 4 && arg&1 != 0 {
					msg.index = int64(arg >> 1) // likely not the snapshot's index
				}
			case 5:
				msg = frame{kind: frameResync, reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START}
			}
			before := snapshotOf(vs)
			wasSnapshot := r.inSnapshot
			err := r.handle(ctx, &msg)
			if err != nil {
				// Refused: nothing published changed; the session ends and another resumes.
				if after := snapshotOf(vs); !maps.EqualFunc(before, after, maps.Equal) {
					t.Fatalf("frame %d (%+v) refused (%v) but the views changed: %v -> %v", pc/2, msg, err, before, after)
				}
				if c.applied.Load() != applied {
					t.Fatalf("frame %d refused but the applied position moved %d -> %d", pc/2, applied, c.applied.Load())
				}
				if !errors.Is(err, ErrOrder) {
					t.Fatalf("frame %d (%+v): %v, want an ErrOrder", pc/2, msg, err)
				}
				r.abort()
				r, snapModel = newSession(), nil
				next = c.applied.Load() + 1
				continue
			}
			switch {
			case msg.kind == frameSnapshotBegin:
				snapModel = map[string]map[string]string{}
				for _, v := range r.snapViews {
					snapModel[v.viewName()] = map[string]string{}
				}
			case wasSnapshot && msg.kind == frameBatch && rows != nil:
				rows(snapModel)
			case msg.kind == frameBatch && rows != nil:
				rows(model)
			case msg.kind == frameSnapshotEnd:
				maps.Copy(model, snapModel)
				snapModel = nil
				next = max(next, msg.index+1)
			}
			if got := c.applied.Load(); got < applied && msg.kind != frameSnapshotEnd {
				t.Fatalf("frame %d (%+v): applied position went back %d -> %d", pc/2, msg, applied, got)
			}
			if r.inSnapshot || r.open {
				continue
			}
			if got := snapshotOf(vs); !maps.EqualFunc(got, model, maps.Equal) {
				t.Fatalf("after frame %d (%+v) the views hold %v, the model %v", pc/2, msg, got, model)
			}
		}
		r.abort()
	})
}

// snapshotOf is every view's published rows.
func snapshotOf(vs []*View[string]) map[string]map[string]string {
	out := make(map[string]map[string]string, len(vs))
	for _, v := range vs {
		m := map[string]string{}
		v.Range(func(k, obj string) bool { m[k] = obj; return true })
		out[v.Name()] = m
	}
	return out
}
