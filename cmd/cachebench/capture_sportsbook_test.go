package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/cmd/internal/bench"
)

// TestSportsbookPrint checks the verdicts capture-sportsbook prints from what it measured:
// each view against the single-table views, those against capture-latency alone, and a
// commit never visible counted at the deadline.
func TestSportsbookPrint(t *testing.T) {
	views := bench.SportsbookViews[:4] // events, markets, selections, event_board
	start := time.Now()
	r := &sportsbookResult{views: views, target: 1000, rate: 1000, start: start, duration: 20 * time.Second,
		deadline: start.Add(time.Minute), pending: make([]int, len(views))}
	for i := range 100 {
		tx := &bench.SportsbookTxn{}
		tx.Sent = start.Add(time.Duration(i) * 200 * time.Millisecond)
		tx.Done = tx.Sent.Add(time.Millisecond)
		r.txns = append(r.txns, tx)
		for v := range views {
			d := 10 * time.Millisecond // the single-table views
			if v == 3 {
				d = 20 * time.Millisecond // event_board: twice as slow
			}
			s := &bench.Txn{}
			if !(v == 3 && i == 99) {
				s.Visible = tx.Sent.Add(d)
			}
			r.seen = append(r.seen, sbSeen{txn: tx, view: v, seen: s})
		}
	}
	var alone bench.Pool
	alone.Add([]time.Duration{9 * time.Millisecond, 9 * time.Millisecond})
	var out bytes.Buffer
	r.print(&out, alone, nil)
	got := out.String()
	wantLines(t, got,
		"goal event_board p50                      <= 1.5 x single-table p50 (15.000 ms): 20.000 ms = 2.00 x  NOT MET",
		"goal single-table views p50               <= 1.2 x capture-latency alone p50 (10.800 ms): 10.000 ms = 1.11 x  MET",
		"(1 not visible within -timeout: counted at it)",
		"2 of 4 goals met",
		"commits  10- 20 s:",
		"drain: not done within -timeout (measured commits still not visible in a view: 1)",
	)
	// The commit never visible in event_board counts at the deadline: its p99.
	if !strings.Contains(got, "goal event_board p99                      <= 1.5 x single-table p99 (15.000 ms): 40200.000 ms") {
		t.Errorf("event_board's p99 is not the missed commit's time at the deadline:\n%s", got)
	}
}

// TestSportsbookPrintOwn checks the lines -own-stream adds: the own stream's pooled row
// beside the shared one's, and its ratios as information, not goals.
func TestSportsbookPrintOwn(t *testing.T) {
	views := bench.SportsbookViews[:3] // the single-table views
	start := time.Now()
	r := &sportsbookResult{views: views, target: 1000, rate: 1000, start: start, duration: 20 * time.Second,
		deadline: start.Add(time.Minute), pending: make([]int, len(views)), ownCycles: bench.Histogram{Count: 10}}
	for i := range 100 {
		tx := &bench.SportsbookTxn{}
		tx.Sent = start.Add(time.Duration(i) * 200 * time.Millisecond)
		tx.Done = tx.Sent.Add(time.Millisecond)
		r.txns = append(r.txns, tx)
		for v := range views {
			r.seen = append(r.seen, sbSeen{txn: tx, view: v, seen: &bench.Txn{Visible: tx.Sent.Add(16 * time.Millisecond)}})
			r.own = append(r.own, sbSeen{txn: tx, view: v, seen: &bench.Txn{Visible: tx.Sent.Add(10 * time.Millisecond)}})
		}
	}
	var alone bench.Pool
	alone.Add([]time.Duration{8 * time.Millisecond, 8 * time.Millisecond})
	var out bytes.Buffer
	r.print(&out, alone, nil)
	got := out.String()
	wantLines(t, got,
		"single-table, own stream     300    10.00     10.00     10.00     0.62    0.62    1.25    1.25",
		"own stream's distributor, whole run: 10 cycles",
		"info single-table views, own stream p50: 10.000 ms = 1.25 x capture-latency alone p50; shared stream / own stream = 1.60 x",
		"0 of 2 goals met",
	)
}

// wantLines fails t for each of want that the output got lacks.
func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the output lacks %q:\n%s", w, got)
		}
	}
}
