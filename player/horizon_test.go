package player

import (
	"slices"
	"testing"
	"time"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

func TestFirstAfterTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &stream{lastOff: -1}
	// offsets with gaps and times: a burst, a quiet hour, a burst.
	recs := []struct {
		off int64
		at  time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {3, 500 * time.Millisecond}, {4, 1500 * time.Millisecond}, {7, time.Hour}, {8, time.Hour + time.Millisecond}}
	for _, r := range recs {
		s.sample(r.off, t0.Add(r.at))
		s.current.Store(r.off)
	}
	tests := []struct {
		r      int64
		want   time.Duration // lower bound of the first record after r
		exists bool
	}{
		{-1, 0, true},                      // first record after -1 is 0, sampled
		{0, 0, true},                       // record 1 is unsampled: bound from sample 0
		{3, 1500 * time.Millisecond, true}, // record 4 is a sample with prev 3: exact
		{4, time.Hour, true},               // quiet hour: record 7 sampled, exact
		{5, time.Hour, true},               // gap: first after 5 is 7
		{7, time.Hour, true},               // record 8 unsampled: bound from sample 7
		{8, 0, false},                      // nothing after the head
		{100, 0, false},
	}
	for _, tc := range tests {
		got, ok := s.firstAfterTime(tc.r)
		if ok != tc.exists || (ok && !got.Equal(t0.Add(tc.want))) {
			t.Errorf("r=%d: got %v %v, want %v %v", tc.r, got.Sub(t0), ok, tc.want, tc.exists)
		}
	}
}

// TestResyncPastTombstoneHorizon: delete.retention.ms is read from the topic; a target
// resuming from an index followed by records older than it gets
// ResyncRequired(PAST_TOMBSTONE_HORIZON) then a snapshot, while a target at the head does not.
func TestResyncPastTombstoneHorizon(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "1500"})
	rnd := newRand(31)
	e.produce(100, []string{"a"}, 50, rnd)
	tp := startPlayer(t, e, nil)
	old, head := newClient("old", e.chk), newClient("head", e.chk)
	old.hasState, old.applied = true, 10 // resumes from 10: records 11.. were written before the horizon
	produced := time.Now()
	waitFor(t, 10*time.Second, "records to age past the horizon", func() bool { return time.Since(produced) > 1600*time.Millisecond })
	last := e.lastOffset()
	head.hasState, head.applied = true, last // nothing after it: no tombstone can be missing
	sessionUntil(t, old, tp.addr, 30*time.Second, func() bool { return old.Applied() >= last })
	e.chk.Gone(old.id) // it stops here; records produced later are not expected
	// head resumes from the last record: nothing follows it, so no tombstone can be missing.
	go func() {
		poll(10*time.Second, func() bool {
			return len(tp.p.Status().Streams[0].Targets) > 0 && tp.p.Status().Streams[0].Targets[0].ID == "head"
		})
		e.produce(5, []string{"a"}, 50, newRand(32))
	}()
	sessionUntil(t, head, tp.addr, 30*time.Second, func() bool { return head.Applied() >= last+5 })
	if want := []statecastv1.ResyncRequired_Reason{statecastv1.ResyncRequired_REASON_PAST_TOMBSTONE_HORIZON}; !slices.Equal(old.resyncs, want) {
		t.Errorf("old: resyncs %v, want %v", old.resyncs, want)
	}
	if len(head.resyncs) != 0 {
		t.Errorf("head: resyncs %v, want none", head.resyncs)
	}
	e.check()
}
