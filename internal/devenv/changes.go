package devenv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// change is one scripted modification of the demo database.
type change struct {
	what string
	sql  string
	// reconcile names the views whose reconcile makes the change visible (deletes become
	// tombstones only at a reconcile).
	reconcile []string
}

// demoChanges is what `cachectl dev` does to the database after the snapshot, in order.
var demoChanges = []change{
	{what: "price of Arsenal v Liverpool / Home drifts to 2.150",
		sql: `UPDATE selections SET price = 2.150 WHERE id = 100011`},
	{what: "market Over/Under 2.5 of Paris v Marseille suspended (join view event_markets)",
		sql: `UPDATE markets SET suspended = true WHERE id = 10012`},
	{what: "Nadal v Djokovic goes live",
		sql: `UPDATE events SET status = 'live', info = info || '{"score": "0-0"}' WHERE id = 1003`},
	{what: "new event Lyon v Lille with a Match Odds market",
		sql: `INSERT INTO events (id, competition_id, name, home, away, starts_at) VALUES
				(1100, 11, 'Lyon v Lille', 'Lyon', 'Lille', '2026-12-02 20:00:00+00');
			INSERT INTO markets (id, event_id, name) VALUES (11001, 1100, 'Match Odds');
			INSERT INTO selections (id, market_id, name, price) VALUES
				(110011, 11001, 'Home', 2.4), (110012, 11001, 'Draw', 3.3), (110013, 11001, 'Away', 2.9)`},
	{what: "competition renamed: every market of Premier League changes in event_markets",
		sql: `UPDATE competitions SET name = 'Premier League 26/27' WHERE id = 10`},
	{what: "event Real Madrid v Olympiacos cancelled and deleted (tombstones at the reconcile)",
		sql: `DELETE FROM events WHERE id = 1004`, reconcile: []string{"events", "event_markets", "selections"}},
}

func applyChange(ctx context.Context, conn *pgx.Conn, c change) error {
	if _, err := conn.Exec(ctx, c.sql); err != nil {
		return fmt.Errorf("devenv: change %q: %w", c.what, err)
	}
	return nil
}
