package player

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
)

// fakeSource follows the source contract over the records in items: it holds those up to
// upTo and is errNotHere past it; err, when set, is what every read returns.
type fakeSource struct {
	t      *target
	term   uint64
	items  []int64
	upTo   int64
	err    error
	reads  []string // "from-to" of each read
	closed bool
}

func (f *fakeSource) read(from, to int64) (int64, error) {
	f.reads = append(f.reads, fmt.Sprintf("%d-%d", from, to))
	if f.err != nil {
		return from, f.err
	}
	if from > f.upTo {
		return from, errNotHere
	}
	for _, i := range f.items {
		if i < from || i > min(to, f.upTo) {
			continue
		}
		if !f.t.pushCatchup(ent(i), f.term, false) {
			return from, errStopped
		}
		from = i + 1
	}
	if to > f.upTo {
		return f.upTo + 1, errNotHere
	}
	return to + 1, nil
}

func (f *fakeSource) close() { f.closed = true }

func catchupIndexes(tg *target) []int64 {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return indexes(tg.q.catchup.items[tg.q.catchup.head:])
}

// TestRecoveryFetcher drives the recovery fetcher's loop (range, sources in turn, range
// extension, fetchingCompleted, failures) over fake sources.
func TestRecoveryFetcher(t *testing.T) {
	const all = math.MaxInt64
	tests := []struct {
		name        string
		from, to    int64
		droppedUpTo int64 // > 0: main entries up to it were dropped while in RF
		srcs        []fakeSource
		wantQueue   []int64
		wantReads   [][]string // per source
		wantState   State
		wantErr     error // the target's suspension cause
	}{
		{name: "one source covers the range", from: 2, to: 7,
			srcs:      []fakeSource{{items: []int64{2, 3, 5, 9}, upTo: all}},
			wantQueue: []int64{2, 3, 5}, wantReads: [][]string{{"2-7"}}, wantState: StateFC},
		{name: "the next source reads from where the first has nothing", from: 2, to: 8,
			srcs:      []fakeSource{{items: []int64{2, 3, 5}, upTo: 4}, {items: []int64{2, 3, 5, 6, 8}, upTo: all}},
			wantQueue: []int64{2, 3, 5, 6, 8}, wantReads: [][]string{{"2-8"}, {"5-8"}}, wantState: StateFC},
		{name: "dropped main entries extend the range", from: 2, to: 7, droppedUpTo: 12,
			srcs:      []fakeSource{{items: []int64{2, 5, 9, 12, 15}, upTo: all}},
			wantQueue: []int64{2, 5, 9, 12}, wantReads: [][]string{{"2-7", "8-12"}}, wantState: StateFC},
		{name: "an empty range completes at once", from: 5, to: 4,
			srcs:      []fakeSource{{items: []int64{5}, upTo: all}},
			wantQueue: nil, wantReads: [][]string{nil}, wantState: StateN},
		{name: "a covered range with nothing of the target's completes to N", from: 3, to: 4,
			srcs:      []fakeSource{{items: []int64{2, 5}, upTo: all}},
			wantQueue: nil, wantReads: [][]string{{"3-4"}}, wantState: StateN},
		{name: "stopped: no fetchingCompleted", from: 2, to: 7,
			srcs:      []fakeSource{{err: errStopped, upTo: all}},
			wantQueue: nil, wantReads: [][]string{{"2-7"}}, wantState: StateRF},
		{name: "a failure suspends the target", from: 2, to: 7,
			srcs:      []fakeSource{{err: ErrStreamUnavailable, upTo: all}},
			wantQueue: nil, wantReads: [][]string{{"2-7"}}, wantState: StateS, wantErr: ErrStreamUnavailable},
		{name: "the last source's errNotHere is a failure", from: 2, to: 7,
			srcs:      []fakeSource{{items: []int64{2}, upTo: 2}},
			wantQueue: nil, wantReads: [][]string{{"2-7"}}, wantState: StateS, wantErr: errNotHere},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{Insecure: true, Brokers: []string{"unused:9092"}, Streams: []StreamConfig{{Name: "s"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			tg := newTarget(p.streams["s"], "r", nil, 1, StateRF, 512, 1<<20)
			tg.lastAck = tc.from - 1
			if tc.droppedUpTo > 0 {
				tg.dropped, tg.droppedUpTo = true, tc.droppedUpTo
			}
			var srcs []source
			for i := range tc.srcs {
				tc.srcs[i].t, tc.srcs[i].term = tg, 1
				srcs = append(srcs, &tc.srcs[i])
			}
			tg.recoveryFetcher(1, tc.from, tc.to, srcs...)
			got := catchupIndexes(tg)
			if tc.wantState == StateS {
				got = nil // suspend cleared the queue
			}
			if !slices.Equal(got, tc.wantQueue) {
				t.Errorf("catch-up queue %v, want %v", got, tc.wantQueue)
			}
			for i := range tc.srcs {
				if !slices.Equal(tc.srcs[i].reads, tc.wantReads[i]) {
					t.Errorf("source %d reads %q, want %q", i, tc.srcs[i].reads, tc.wantReads[i])
				}
				if !tc.srcs[i].closed {
					t.Errorf("source %d not closed", i)
				}
			}
			tg.mu.Lock()
			state, dropped, terr := tg.q.state, tg.dropped, tg.err
			tg.mu.Unlock()
			if state != tc.wantState {
				t.Errorf("state %s, want %s", state, tc.wantState)
			}
			if dropped && state != StateRF {
				t.Errorf("still dropped after completion")
			}
			if (tc.wantErr == nil) != (terr == nil) || tc.wantErr != nil && !errors.Is(terr, tc.wantErr) {
				t.Errorf("suspended with %v, want %v", terr, tc.wantErr)
			}
		})
	}
}

// TestRecoveryFetcherLogStartMoved: a source that finds the log start moved past the range
// resyncs the target on the same stream: a new term, then ResyncRequired and a snapshot
// at the main position in the catch-up queue, and fetchingCompleted.
func TestRecoveryFetcherLogStartMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := New(Config{Insecure: true, Brokers: []string{"unused:9092"}, Streams: []StreamConfig{{Name: "s"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		s := p.streams["s"]
		s.offsetsHook = func() (int64, int64, error) { return 10, 11, nil }
		s.current.Store(10)
		tg := newTarget(s, "r", nil, 1, StateRF, 512, 1<<20)
		tg.lastAck, tg.sentUpTo = 3, 3
		s.mu.Lock()
		s.terms["r"] = 1
		s.byClient["r"] = tg
		s.register(tg)
		s.mu.Unlock()

		moved := &fakeSource{t: tg, term: 1, err: fmt.Errorf("%w: test", errLogStartMoved), upTo: math.MaxInt64}
		tg.recoveryFetcher(1, 4, 8, moved)

		synctest.Wait() // the resync needs no time: once nothing runs, it is done
		tg.mu.Lock()
		state, term := tg.q.state, tg.q.term
		var frames []string
		for _, it := range tg.q.catchup.items[tg.q.catchup.head:] {
			switch f := it.frame; {
			case f.GetResyncRequired() != nil:
				frames = append(frames, fmt.Sprintf("resync %s", f.GetResyncRequired().GetReason()))
			case f.GetSnapshotBegin() != nil:
				frames = append(frames, fmt.Sprintf("begin %d", f.GetSnapshotBegin().GetIndex()))
			case f.GetSnapshotEnd() != nil:
				frames = append(frames, fmt.Sprintf("end %d", f.GetSnapshotEnd().GetIndex()))
			}
		}
		tg.mu.Unlock()
		want := []string{"resync REASON_BELOW_LOG_START", "begin 10", "end 10"}
		if state != StateFC || !slices.Equal(frames, want) || term != 2 {
			t.Fatalf("state %s term %d frames %q, want FC, term 2 and %q", state, term, frames, want)
		}
	})
}
