package devenv

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
)

// change is one scripted modification of the demo database.
type change struct {
	what string
	sql  string
	// inCache reports whether the sportsbook service's memory shows the change.
	inCache func(s *sportsbook.Service) bool
	// onChange is a text the service's OnChange log line for this change contains ("" if
	// the change touches no event).
	onChange string
	// show are the HTTP paths of the service printed once the change is in the cache.
	show []string
	// delete: the change deletes rows (the demo says how their tombstones came).
	delete bool
}

// demoChanges is what `cachectl dev` does to the database after the snapshot, in order.
var demoChanges = []change{
	{what: "price of Arsenal v Liverpool / Home drifts to 2.150",
		sql: `UPDATE selections SET price = 2.150 WHERE id = 100011`,
		inCache: func(s *sportsbook.Service) bool {
			x, ok := s.Selections.Get(cacheclient.Key("10001", "100011"))
			return ok && x.Price == "2.150"
		},
		show: []string{"/events/1000"}},
	{what: "market Over/Under 2.5 of Paris v Marseille suspended (join view event_markets)",
		sql: `UPDATE markets SET suspended = true WHERE id = 10012`,
		inCache: func(s *sportsbook.Service) bool {
			m, ok := s.Markets.Get(cacheclient.Key("1001", "10012"))
			return ok && m.Suspended
		},
		show: []string{"/events/1001"}},
	{what: "Nadal v Djokovic goes live",
		sql: `UPDATE events SET status = 'live', info = info || '{"score": "0-0"}' WHERE id = 1003`,
		inCache: func(s *sportsbook.Service) bool {
			return len(s.Events.ByIndexKeys("status", "live")) == 1 && len(s.Events.ByIndexKeys("status", "scheduled")) == 19
		},
		onChange: `msg="event changed" id=1003`,
		show:     []string{"/events/1003", "/status/live/events"}},
	{what: "new event Lyon v Lille with a Match Odds market",
		sql: `INSERT INTO events (id, competition_id, name, home, away, starts_at) VALUES
				(1100, 11, 'Lyon v Lille', 'Lyon', 'Lille', '2026-12-02 20:00:00+00');
			INSERT INTO markets (id, event_id, name) VALUES (11001, 1100, 'Match Odds');
			INSERT INTO selections (id, market_id, name, price) VALUES
				(110011, 11001, 'Home', 2.4), (110012, 11001, 'Draw', 3.3), (110013, 11001, 'Away', 2.9)`,
		inCache: func(s *sportsbook.Service) bool {
			d, ok := s.Event("1100")
			return ok && len(d.Markets) == 1 && len(d.Markets[0].Selections) == 3 &&
				slices.Contains(s.Events.ByIndexKeys("sport", "1"), "1100")
		},
		onChange: `msg="event added" id=1100`,
		show:     []string{"/events/1100", "/competitions/11/events", "/sports/1/events"}},
	{what: "competition renamed: every market of Premier League changes in event_markets",
		sql: `UPDATE competitions SET name = 'Premier League 26/27' WHERE id = 10`,
		inCache: func(s *sportsbook.Service) bool {
			n := 0
			for _, e := range s.Events.ByIndexKeys("competition", "10") {
				for _, m := range s.Markets.ByIndex("event", e) {
					if m.Competition != "Premier League 26/27" {
						return false
					}
					n++
				}
			}
			return n > 0
		},
		show: []string{"/events/1000"}},
	{what: "event Real Madrid v Olympiacos cancelled and deleted (ON DELETE CASCADE deletes its markets and selections)",
		sql:    `DELETE FROM events WHERE id = 1004`,
		delete: true,
		inCache: func(s *sportsbook.Service) bool {
			if _, ok := s.Events.Get("1004"); ok || len(s.Markets.ByIndexKeys("event", "1004")) > 0 {
				return false
			}
			for _, m := range []string{"10041", "10042", "10043"} {
				if len(s.Selections.ByIndexKeys("market", m)) > 0 {
					return false
				}
			}
			return true
		},
		onChange: `msg="event removed" id=1004`,
		show:     []string{"/events/1004", "/competitions/30/events"}},
}

// applyChange runs the change in one transaction and returns the WAL insert position read
// after its COMMIT on the same connection: once the cache's source position reaches it,
// the cache reflects the change (cacheclient's WaitFor).
func applyChange(ctx context.Context, conn *pgx.Conn, c change) (cacheclient.LSN, error) {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, c.sql)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("devenv: change %q: %w", c.what, err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return 0, fmt.Errorf("devenv: WAL position: %w", err)
	}
	return cacheclient.ParseLSN(lsn)
}
