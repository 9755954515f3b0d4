package distributor

import (
	"context"
	"os"
	"slices"
	"testing"
)

// diffKnown are the minimal cases TestWALDifferential found for the views of the corpus
// whose mapping diverges (diffView.known): one transaction from diffFixture after which
// the view's cache differs from its SQL. Found with STATECAST_DIFF_VIEWS=<view> and
// shrunk by rapid.
var diffKnown = []diffKnownCase{
	// Event 2 gets a score: its row stays (rapid's case); event 4 loses its score: its row
	// is not published.
	{view: "unscored_events", stmts: []string{"INSERT INTO scores VALUES (2, 0, 0)"}},
	{view: "unscored_events", stmts: []string{"DELETE FROM scores WHERE event_id = 4"}},
	// Market 9 moves from event 5 to event 2: the rows of markets 3 (event 2) and 8 (event
	// 5) keep their sibling counts.
	{view: "open_siblings", stmts: []string{"UPDATE markets SET event_id = 2 WHERE id = 9"}},
	// Team 1, home team of event 1 and away team of event 4, is renamed: event 4's row
	// is re-read, event 1's keeps the old name.
	{view: "home_and_away", stmts: []string{"UPDATE teams SET name = 'bears' WHERE id = 1"}},
	// Market 12 is added to event 1: the rows of markets 1, 2 and 10 keep 3 markets.
	{view: "market_boards", stmts: []string{"INSERT INTO markets VALUES (12, 1, 'winner', 'open')"}},
}

type diffKnownCase struct {
	view  string
	stmts []string
}

// TestWALDifferentialKnown replays the known divergences. It expects each one to be
// still there, so that the day the mapping handles the shape this test fails and says to
// put the view back into TestWALDifferential's runs (remove its known and its case here).
// With STATECAST_DIFF_ALL set it expects every view to converge instead: the check for
// whoever fixes the mapping.
func TestWALDifferentialKnown(t *testing.T) {
	var views []diffView
	for _, v := range diffCorpus {
		if v.known == "" {
			continue
		}
		views = append(views, v)
		if !slices.ContainsFunc(diffKnown, func(k diffKnownCase) bool { return k.view == v.name }) {
			t.Errorf("view %s is marked known in the corpus but has no case in diffKnown", v.name)
		}
	}
	fixed := os.Getenv(envDiffAll) != ""
	rig := newDiffRig(t, views)
	ctx := context.Background()
	for _, c := range diffKnown {
		t.Run(c.view+"/"+c.stmts[0], func(t *testing.T) {
			if !slices.ContainsFunc(views, func(v diffView) bool { return v.name == c.view }) {
				t.Fatalf("view %s has a known case but is not marked known in the corpus", c.view)
			}
			if err := rig.reset(ctx); err != nil {
				t.Fatal(err)
			}
			if err := rig.compare(ctx, "the reset"); err != nil {
				t.Fatal(err)
			}
			if _, err := rig.execTxn(ctx, rig.e.db, diffTxn{stmts: c.stmts}); err != nil {
				t.Fatal(err)
			}
			diffs, err := rig.divergences(ctx, c.view)
			if err != nil {
				t.Fatal(err)
			}
			d, diverged := diffs[c.view]
			switch {
			case fixed && diverged:
				t.Fatalf("after %q:\n%s", c.stmts, d)
			case !fixed && !diverged:
				t.Fatalf("view %s no longer diverges after %q: remove its known in diffCorpus and its case in diffKnown, so that TestWALDifferential runs it", c.view, c.stmts)
			case diverged:
				t.Logf("still diverges (known) after %q:\n%s", c.stmts, d)
			}
		})
	}
}
