package bench

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
)

func TestSportsbookSize(t *testing.T) {
	s := SportsbookSizeOf(1)
	if s.Markets() < 100_000 || s.Selections() < 300_000 || s.Bets < 1_000_000 {
		t.Errorf("scale 1 is %v: want at least 100,000 markets, 300,000 selections, 1,000,000 bets", s)
	}
	if s := SportsbookSizeOf(0.00001); s.Events < 1 || s.Teams < 2 || s.Bets < 1 {
		t.Errorf("a tiny scale gives %v", s)
	}
}

func TestSportsbookViewsNamed(t *testing.T) {
	all, err := SportsbookViewsNamed("")
	if err != nil || len(all) != len(SportsbookViews) {
		t.Fatalf("all views: %d, %v", len(all), err)
	}
	some, err := SportsbookViewsNamed("best_price, event_board")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range some {
		names = append(names, v.Name)
	}
	if want := []string{"events", "markets", "selections", "event_board", "best_price"}; !slices.Equal(names, want) {
		t.Errorf("views %v, want %v (the single-table ones always, in order)", names, want)
	}
	if _, err := SportsbookViewsNamed("nope"); err == nil {
		t.Error("an unknown view was accepted")
	}
	for _, v := range SportsbookViews {
		if single := v.Name == "events" || v.Name == "markets" || v.Name == "selections"; v.Single() != single {
			t.Errorf("view %s: single %v, want %v", v.Name, v.Single(), single)
		}
	}
}

func TestSeqDecoder(t *testing.T) {
	if v, err := SeqDecoder("k", []byte(`{"id":1,"seq":42}`)); err != nil || v != 42 {
		t.Errorf("got %d, %v", v, err)
	}
	if _, err := SeqDecoder("k", []byte(`{"id":1}`)); err == nil {
		t.Error("a row without seq was decoded")
	}
}

// TestSportsbookPartition plans many transactions of one writer and checks what they
// expect against what they write, and that the partition stays as the views need it.
func TestSportsbookPartition(t *testing.T) {
	size := SportsbookSize{Sports: 2, Competitions: 3, Teams: 6, Events: 40, MarketsPerEvent: 5, SelectionsPerMarket: 3, Bets: 10}
	p := newPartition(size, 1, 2, 7)
	if len(p.events) != 20 {
		t.Fatalf("writer 1 of 2 owns %d of 40 events", len(p.events))
	}
	names := map[string]bool{}
	for _, v := range SportsbookViews {
		names[v.Name] = true
	}
	kinds := map[string]int{}
	for seq := int64(1); seq <= 5000; seq++ {
		tx := p.next(seq)
		kinds[tx.Kind]++
		exp := map[string][]string{}
		for _, vk := range tx.Expect {
			if !names[vk.View] {
				t.Fatalf("%s expects view %s, which does not exist", tx.Kind, vk.View)
			}
			if len(vk.Keys) == 0 || len(slices.Compact(slices.Sorted(slices.Values(vk.Keys)))) != len(vk.Keys) {
				t.Fatalf("%s: view %s keys %v: empty or repeated", tx.Kind, vk.View, vk.Keys)
			}
			exp[vk.View] = vk.Keys
		}
		has := func(view string, keys ...string) {
			t.Helper()
			for _, k := range keys {
				if !slices.Contains(exp[view], k) {
					t.Fatalf("%s (seq %d): view %s expects %v, not %s", tx.Kind, seq, view, exp[view], k)
				}
			}
		}
		id := func(n int64) string { return strconv.FormatInt(n, 10) }
		for _, m := range tx.markets {
			e := id(p.eventOf(m))
			has("markets", id(m))
			has("best_price", id(m))
			has("market_selection_counts", id(m))
			has("market_bets", id(m))
			has("board_rows", cacheclient.Key("market", id(m)))
			has("event_board", e)
			has("event_market_counts", e)
			has("event_markets", e)
			for _, s := range p.sels[m] {
				has("selection_rank", id(s))
			}
		}
		for _, pr := range tx.prices {
			has("selections", id(pr.selection))
		}
		for _, b := range tx.bets {
			has("market_bets", id(b.market))
			if !slices.Contains(p.sels[b.market], b.selection) {
				t.Fatalf("bet on selection %d of market %d, which does not hold it", b.selection, b.market)
			}
		}
		if tx.event != nil {
			e := id(tx.event.id)
			for _, v := range []string{"events", "event_teams", "events_open", "event_board", "event_markets"} {
				has(v, e)
			}
			has("board_rows", cacheclient.Key("event", e))
		} else if len(exp["events"]) > 0 {
			t.Fatalf("%s writes no event but expects events %v", tx.Kind, exp["events"])
		}
		if tx.move != nil {
			has("selections", id(tx.move.selection))
			if p.eventOf(tx.move.from) != p.eventOf(tx.move.to) || tx.move.from == tx.move.to {
				t.Fatalf("moved from market %d to %d", tx.move.from, tx.move.to)
			}
		}
		if tx.Kind == SBBets && (len(exp["selections"]) > 0 || len(exp["markets"]) > 0) {
			t.Fatalf("bets expect rows of selections or markets: %v", exp)
		}
	}
	for _, k := range SportsbookKinds {
		if kinds[k.Kind] == 0 {
			t.Errorf("no %s transaction in 5,000 (%v)", k.Kind, kinds)
		}
	}
	for _, e := range p.events {
		for _, m := range p.marketsOf(e) {
			if len(p.sels[m]) == 0 {
				t.Errorf("market %d lost its last selection", m)
			}
			if p.main(m) && p.suspended[m] {
				t.Errorf("main market %d suspended", m)
			}
		}
	}
	if len(p.susp) != len(p.suspended) {
		t.Errorf("%d suspended markets listed, %d marked", len(p.susp), len(p.suspended))
	}
}

// TestSportsbookExpectations runs the writers on a small seeded sportsbook in PostgreSQL
// and checks after each commit that every row it expects in a view shows its seq.
func TestSportsbookExpectations(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, ctx, dsn)
	size := SportsbookSize{Sports: 2, Competitions: 3, Teams: 6, Events: 12, MarketsPerEvent: 5, SelectionsPerMarket: 3, Bets: 500}
	if _, err := conn.Exec(ctx, SportsbookSchema); err != nil {
		t.Fatal(err)
	}
	if err := SeedSportsbook(ctx, conn, size); err != nil {
		t.Fatal(err)
	}
	sb, err := NewSportsbook(ctx, dsn, size, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	views := map[string]SportsbookView{}
	for _, v := range SportsbookViews {
		views[v.Name] = v
	}
	kinds := map[string]int{}
	for range 300 {
		txns, err := sb.Run(ctx, SportsbookRun{Txns: 1})
		if err != nil {
			t.Fatal(err)
		}
		tx := txns[0]
		kinds[tx.Kind]++
		for _, vk := range tx.Expect {
			v := views[vk.View]
			var where []string
			for i, k := range v.Key {
				where = append(where, k+"::text = $"+strconv.Itoa(i+1))
			}
			for _, key := range vk.Keys {
				parts, err := cacheclient.SplitKey(key)
				if err != nil {
					t.Fatal(err)
				}
				args := make([]any, len(parts))
				for i, p := range parts {
					args[i] = p
				}
				var seq int64
				if err := conn.QueryRow(ctx, "SELECT seq FROM ("+v.SQL+") v WHERE "+strings.Join(where, " AND "), args...).Scan(&seq); err != nil {
					t.Fatalf("%s: view %s key %s: %v", tx.Kind, v.Name, key, err)
				}
				if seq != tx.Version {
					t.Fatalf("%s: view %s key %s shows seq %d, want %d", tx.Kind, v.Name, key, seq, tx.Version)
				}
			}
		}
	}
	if err := sb.Check(ctx); err != nil {
		t.Error(err)
	}
	t.Logf("kinds: %v", kinds)
}
