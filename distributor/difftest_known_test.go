package distributor

import (
	"context"
	"os"
	"slices"
	"testing"
)

// diffKnown are the minimal cases TestWALDifferential found for the views of the corpus
// whose mapping diverged (diffView.known): one transaction from diffFixture after which
// the view's cache differed from its SQL. Found with STATECAST_DIFF_VIEWS=<view> and
// shrunk by rapid. The mapping derived from PostgreSQL's query tree handles them all:
// they stay as regression cases (fixed), each view back in TestWALDifferential's runs.
var diffKnown = []diffKnownCase{
	// Event 2 gets a score: its row stays (rapid's case); event 4 loses its score: its row
	// is not published.
	{view: "unscored_events", stmts: []string{"INSERT INTO scores VALUES (2, 0, 0)"}, fixed: true},
	{view: "unscored_events", stmts: []string{"DELETE FROM scores WHERE event_id = 4"}, fixed: true},
	// Market 9 moves from event 5 to event 2: the rows of markets 3 (event 2) and 8 (event
	// 5) keep their sibling counts.
	{view: "open_siblings", stmts: []string{"UPDATE markets SET event_id = 2 WHERE id = 9"}, fixed: true},
	// Team 1, home team of event 1 and away team of event 4, is renamed: event 4's row
	// is re-read, event 1's keeps the old name.
	{view: "home_and_away", stmts: []string{"UPDATE teams SET name = 'bears' WHERE id = 1"}, fixed: true},
	// Market 12 is added to event 1: the rows of markets 1, 2 and 10 keep 3 markets.
	{view: "market_boards", stmts: []string{"INSERT INTO markets VALUES (12, 1, 'winner', 'open')"}, fixed: true},
}

type diffKnownCase struct {
	view  string
	stmts []string
	// fixed: the mapping handles it; the case must converge (a regression test).
	fixed bool
}

// TestWALDifferentialKnown replays the minimal cases: a fixed one must converge (a
// regression test); a known one is expected to diverge still, so that the day the mapping
// handles its shape this test fails and says to put the view back into
// TestWALDifferential's runs. With STATECAST_DIFF_ALL set it expects every case to
// converge: the check for whoever fixes the mapping.
func TestWALDifferentialKnown(t *testing.T) {
	var views []diffView
	for _, v := range diffCorpus {
		if !slices.ContainsFunc(diffKnown, func(k diffKnownCase) bool { return k.view == v.name }) {
			continue
		}
		views = append(views, v)
	}
	for _, v := range diffCorpus {
		if v.known != "" && !slices.ContainsFunc(diffKnown, func(k diffKnownCase) bool { return k.view == v.name && !k.fixed }) {
			t.Errorf("view %s is marked known in the corpus but has no case in diffKnown", v.name)
		}
	}
	all := os.Getenv(envDiffAll) != ""
	rig := newDiffRig(t, views)
	ctx := context.Background()
	for _, c := range diffKnown {
		t.Run(c.view+"/"+c.stmts[0], func(t *testing.T) {
			i := slices.IndexFunc(views, func(v diffView) bool { return v.name == c.view })
			if i < 0 {
				t.Fatalf("view %s has a case but is not in the corpus", c.view)
			}
			if known := views[i].known != ""; known == c.fixed {
				t.Fatalf("view %s: known in the corpus %v, but its case says fixed %v", c.view, known, c.fixed)
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
			converge := c.fixed || all
			switch {
			case converge && diverged:
				t.Fatalf("after %q:\n%s", c.stmts, d)
			case !converge && !diverged:
				t.Fatalf("view %s no longer diverges after %q: remove its known in diffCorpus and mark its case fixed, so that TestWALDifferential runs it", c.view, c.stmts)
			case diverged:
				t.Logf("still diverges (known) after %q:\n%s", c.stmts, d)
			}
		})
	}
}
