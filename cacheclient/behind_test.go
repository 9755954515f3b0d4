package cacheclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// posBehind is a position entry at lsn naming views behind it, at their own positions.
func posBehind(index int64, lsn string, behind map[string]string) *statecastv1.Entry {
	return &statecastv1.Entry{Index: index, Kind: statecastv1.Kind_KIND_POSITION, Key: record.PositionKey(),
		Value:      (&record.Position{LSN: lsn, Time: testSourceTime.AsTime(), Behind: behind}).Marshal(),
		SourceTime: testSourceTime, SourceLsn: lsn}
}

// TestWaitForBehindView: a position record that names a view of the client as behind, at
// its own earlier position, holds WaitFor beyond that position until a later record brings
// the view up; a view behind that the client does not hold holds nothing; the state file
// keeps the positions of the views behind across a restart.
func TestWaitForBehindView(t *testing.T) {
	dir := t.TempDir()
	resumed := make(chan struct{})
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex != nil {
			<-resumed
			return s.batch(posBehind(4, "0/40", nil))
		}
		return s.snapshot(3, ent(1, "1", evJSON(1, "a")), posBehind(3, "0/30", map[string]string{"markets": "0/20", "other": "0/10"}))
	})
	c, _, _ := startTwoViews(t, Config{StateDir: dir}, fp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitFor(ctx, mustLSN(t, "0/20")); err != nil {
		t.Fatalf("WaitFor(0/20) with markets behind at 0/20: %v", err)
	}
	if cut := c.Read(); cut.SourcePosition() != mustLSN(t, "0/30") {
		t.Fatalf("source position %v, want the stream's 0/30", cut.SourcePosition())
	}
	short, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	if err := c.WaitFor(short, mustLSN(t, "0/21")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor(0/21) with markets behind at 0/20: %v, want a wait", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := readState(b, "s", nil, &memSink{})
	if err != nil || len(head.src.behind) != 1 || head.src.behind["markets"] != mustLSN(t, "0/20") {
		t.Fatalf("state file head %+v, %v: want markets behind at 0/20 (the other view is not the client's)", head.src, err)
	}

	c2, _, _ := startTwoViews(t, Config{StateDir: dir}, fp)
	short2, scancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel2()
	if err := c2.WaitFor(short2, mustLSN(t, "0/25")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("restarted: WaitFor(0/25) with markets behind at 0/20: %v, want a wait", err)
	}
	close(resumed) // a position record with no view behind: markets caught up
	if err := c2.WaitFor(ctx, mustLSN(t, "0/40")); err != nil {
		t.Fatalf("WaitFor(0/40) once markets caught up: %v", err)
	}
}
