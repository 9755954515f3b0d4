package devenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
)

// viewCheck is the comparison of one cached view (and its indexes) with its SQL query.
type viewCheck struct {
	view string
	rows int    // rows in PostgreSQL
	diff string // empty when equal
}

func (c viewCheck) String() string {
	if c.diff == "" {
		return fmt.Sprintf("%-14s %3d rows  OK", c.view, c.rows)
	}
	return fmt.Sprintf("%-14s %3d rows  DIFFERS: %s", c.view, c.rows, c.diff)
}

// compareAll compares every view of the service, and its secondary indexes, with the
// demo database; the fields compared are those the service keeps.
func compareAll(ctx context.Context, conn *pgx.Conn, s *sportsbook.Service) ([]viewCheck, error) {
	sports, err := queryMap(ctx, conn, `SELECT id, name FROM sports`, func(r pgx.Rows) (string, sportsbook.Sport, error) {
		var x sportsbook.Sport
		err := r.Scan(&x.ID, &x.Name)
		return itoa(x.ID), x, err
	})
	if err != nil {
		return nil, err
	}
	events, err := queryMap(ctx, conn, `SELECT e.id, e.competition_id, c.sport_id, e.name, e.starts_at, e.status::text, e.tags
		FROM events e JOIN competitions c ON c.id = e.competition_id`,
		func(r pgx.Rows) (string, sportsbook.Event, error) {
			var x sportsbook.Event
			var t time.Time
			err := r.Scan(&x.ID, &x.CompetitionID, &x.SportID, &x.Name, &t, &x.Status, &x.Tags)
			x.StartsAt = t.UTC().Format(time.RFC3339Nano)
			return itoa(x.ID), x, err
		})
	if err != nil {
		return nil, err
	}
	markets, err := queryMap(ctx, conn, `SELECT e.id, m.id, c.name, m.name, m.suspended
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`,
		func(r pgx.Rows) (string, sportsbook.Market, error) {
			var x sportsbook.Market
			err := r.Scan(&x.EventID, &x.MarketID, &x.Competition, &x.Market, &x.Suspended)
			return cacheclient.Key(itoa(x.EventID), itoa(x.MarketID)), x, err
		})
	if err != nil {
		return nil, err
	}
	sels, err := queryMap(ctx, conn, `SELECT market_id, id, name, price::text FROM selections`,
		func(r pgx.Rows) (string, sportsbook.Selection, error) {
			var x sportsbook.Selection
			err := r.Scan(&x.MarketID, &x.ID, &x.Name, &x.Price)
			return cacheclient.Key(itoa(x.MarketID), itoa(x.ID)), x, err
		})
	if err != nil {
		return nil, err
	}
	eqEvent := func(a, b sportsbook.Event) bool {
		ta, _ := time.Parse(time.RFC3339Nano, a.StartsAt)
		tb, _ := time.Parse(time.RFC3339Nano, b.StartsAt)
		return a.ID == b.ID && a.CompetitionID == b.CompetitionID && a.SportID == b.SportID && a.Name == b.Name && ta.Equal(tb) &&
			a.Status == b.Status && slices.Equal(a.Tags, b.Tags)
	}
	return []viewCheck{
		compareView(s.Sports, sports, func(a, b sportsbook.Sport) bool { return a == b }, nil),
		compareView(s.Events, events, eqEvent, sportsbook.EventIndexes),
		compareView(s.Markets, markets, func(a, b sportsbook.Market) bool { return a == b }, sportsbook.MarketIndexes),
		compareView(s.Selections, sels, func(a, b sportsbook.Selection) bool { return a == b }, sportsbook.SelectionIndexes),
	}, nil
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

func queryMap[T any](ctx context.Context, conn *pgx.Conn, sql string, scan func(pgx.Rows) (string, T, error)) (map[string]T, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("devenv: %s: %w", sql, err)
	}
	defer rows.Close()
	m := map[string]T{}
	for rows.Next() {
		k, v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("devenv: %s: %w", sql, err)
		}
		m[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("devenv: %s: %w", sql, err)
	}
	return m, nil
}

// compareView compares one version of a view (View.Version) with the rows PostgreSQL
// holds, then each secondary index with the one the SQL rows would give.
func compareView[T any](v *cacheclient.View[T], want map[string]T, eq func(a, b T) bool, indexes map[string]func(T) []string) viewCheck {
	c := viewCheck{view: v.Name(), rows: len(want)}
	ver := v.Version()
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := ver.Get(k)
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("key %s missing from the cache", k))
		case !eq(got, want[k]):
			diffs = append(diffs, fmt.Sprintf("key %s: cache %+v, SQL %+v", k, got, want[k]))
		}
	}
	ver.Range(func(k string, _ T) bool {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("key %s in the cache, not in SQL", k))
		}
		return true
	})
	for _, name := range slices.Sorted(maps.Keys(indexes)) {
		wantIdx := map[string][]string{}
		for k, row := range want {
			for _, val := range indexes[name](row) {
				wantIdx[val] = append(wantIdx[val], k)
			}
		}
		if got := ver.IndexValues(name); !sameSet(got, slices.Collect(maps.Keys(wantIdx))) {
			diffs = append(diffs, fmt.Sprintf("index %s values: cache %v", name, slices.Sorted(slices.Values(got))))
			continue
		}
		for val, keys := range wantIdx {
			if got := ver.ByIndexKeys(name, val); !sameSet(got, keys) {
				diffs = append(diffs, fmt.Sprintf("index %s[%s]: cache %v, SQL %v", name, val, sorted(got), sorted(keys)))
			}
		}
	}
	if len(diffs) > 0 {
		if len(diffs) > 3 {
			diffs = append(diffs[:3], fmt.Sprintf("… %d more", len(diffs)-3))
		}
		c.diff = strings.Join(diffs, "; ")
	}
	return c
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

// converge waits until every cached view and index equals its SQL query (or the check
// timeout passes) and prints the comparison and the client's epoch checks.
func (r *run) converge(ctx context.Context, svc *runningService) error {
	conn, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if r.o.beforeConverge != nil {
		if err := r.o.beforeConverge(ctx, conn, func() { _ = r.stopDist() }); err != nil {
			return err
		}
	}
	start := time.Now()
	var checks []viewCheck
	var qerr error
	werr := poll(ctx, r.o.CheckTimeout, func() bool {
		checks, qerr = compareAll(ctx, conn, svc.s)
		if qerr != nil {
			return true
		}
		for _, c := range checks {
			if c.diff != "" {
				return false
			}
		}
		return true
	})
	if qerr != nil {
		return qerr
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return werr
	}
	r.say("convergence check: each cached view and its indexes against its SQL query in PostgreSQL")
	for _, c := range checks {
		fmt.Fprintf(r.out, "   %s\n", c)
	}
	st := svc.s.Client.Stats()
	if st.EpochChecks == 0 {
		// With WAL capture no epoch follows the start-up snapshot unless one is asked for.
		fmt.Fprintf(r.out, "   epoch-end checks in the client: none (no epoch since the snapshot); decode errors %d\n", st.DecodeErrors)
	} else {
		fmt.Fprintf(r.out, "   epoch-end checks in the client (row count + hash vs the distributor's): %d passed, %d mismatches; decode errors %d\n",
			st.EpochChecks-st.EpochMismatches, st.EpochMismatches, st.DecodeErrors)
	}
	switch {
	case werr != nil:
		r.failed = append(r.failed, fmt.Sprintf("cache differs from PostgreSQL after %v", r.o.CheckTimeout))
		r.say("convergence: DIFFERS after %v", r.o.CheckTimeout)
	case st.EpochMismatches > 0 || st.DecodeErrors > 0:
		r.failed = append(r.failed, "epoch mismatches or decode errors in the client")
		r.say("convergence: views equal, but the client counted epoch mismatches or decode errors")
	default:
		r.say("convergence: OK (cache = PostgreSQL, checked in %v)", time.Since(start).Round(time.Millisecond))
	}
	r.sink.flush(r.out, logPrefix, 8)
	return nil
}
