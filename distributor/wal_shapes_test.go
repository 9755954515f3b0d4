package distributor

import (
	"context"
	"strings"
	"testing"
)

// shapesSchema: clubs play games (home and away), games have lines (markets), lines have
// picks (selections); a game may have a score; board is a database view that aggregates
// a three-table join, and board2 a view over it.
const shapesSchema = `
CREATE TABLE clubs (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE games (id int PRIMARY KEY, home_id int NOT NULL REFERENCES clubs, away_id int NOT NULL REFERENCES clubs, status text NOT NULL);
CREATE TABLE lines (id int PRIMARY KEY, game_id int NOT NULL REFERENCES games ON DELETE CASCADE, name text NOT NULL, open bool NOT NULL);
CREATE TABLE picks (id int PRIMARY KEY, line_id int NOT NULL REFERENCES lines ON DELETE CASCADE, price int NOT NULL);
CREATE TABLE scores (game_id int PRIMARY KEY REFERENCES games ON DELETE CASCADE, home int NOT NULL, away int NOT NULL);
CREATE VIEW board AS SELECT g.id, g.status, count(DISTINCT l.id) AS lines, count(p.id) AS picks, min(p.price) AS best
	FROM games g JOIN lines l ON l.game_id = g.id JOIN picks p ON p.line_id = l.id GROUP BY g.id;
CREATE VIEW board2 AS SELECT * FROM board WHERE lines > 0;
INSERT INTO clubs VALUES (1, 'Arsenal'), (2, 'Chelsea'), (3, 'Spurs'), (4, 'Everton');
INSERT INTO games VALUES (10, 1, 2, 'open'), (11, 3, 4, 'open'), (12, 2, 3, 'closed');
INSERT INTO lines VALUES (100, 10, 'winner', true), (101, 10, 'total', false), (110, 11, 'winner', true), (120, 12, 'winner', false);
INSERT INTO picks VALUES (1000, 100, 150), (1001, 100, 210), (1010, 101, 190), (1100, 110, 300), (1200, 120, 120);
INSERT INTO scores VALUES (12, 1, 0);
`

// shapeViews are the shapes services write, every table of each mapped: none of them is
// re-read whole by a change.
var shapeViews = []ViewConfig{
	{Name: "over_views", SQL: "SELECT id, status, lines, picks, best FROM board2", Key: []string{"id"}},
	{Name: "home_away", SQL: "SELECT g.id, h.name AS home, a.name AS away FROM games g JOIN clubs h ON h.id = g.home_id JOIN clubs a ON a.id = g.away_id", Key: []string{"id"}},
	{Name: "lines_per_game", SQL: "SELECT g.id, count(l.id) AS n, count(l.id) FILTER (WHERE l.open) AS open FROM games g LEFT JOIN lines l ON l.game_id = g.id GROUP BY g.id", Key: []string{"id"}},
	{Name: "picks_per_game", SQL: "SELECT g.id, count(p.id) AS n, coalesce(sum(p.price), 0) AS total FROM games g JOIN lines l ON l.game_id = g.id JOIN picks p ON p.line_id = l.id GROUP BY g.id", Key: []string{"id"}},
	{Name: "with_open_line", SQL: "SELECT g.id, g.status FROM games g WHERE EXISTS (SELECT 1 FROM lines l WHERE l.game_id = g.id AND l.open)", Key: []string{"id"}},
	{Name: "tagged", SQL: "SELECT 'game' AS kind, id, status AS label FROM games UNION ALL SELECT 'line', id, name FROM lines", Key: []string{"kind", "id"}},
	{Name: "ranked", SQL: "SELECT p.id, p.line_id, rank() OVER (PARTITION BY p.line_id ORDER BY p.price, p.id) AS r FROM picks p", Key: []string{"id"}},
	{Name: "best_pick", SQL: "SELECT DISTINCT ON (p.line_id) p.line_id, p.id, p.price FROM picks p ORDER BY p.line_id, p.price, p.id", Key: []string{"line_id"}},
	{Name: "line_picks", SQL: "SELECT l.id, l.name, (SELECT count(*) FROM picks p WHERE p.line_id = l.id) AS n FROM lines l", Key: []string{"id"}},
	{Name: "cte", SQL: "WITH best AS (SELECT line_id, min(price) AS price FROM picks GROUP BY line_id) SELECT l.id, l.name, b.price FROM lines l JOIN best b ON b.line_id = l.id", Key: []string{"id"}},
	{Name: "scored", SQL: "SELECT g.id, s.home, s.away FROM games g LEFT JOIN scores s ON s.game_id = g.id", Key: []string{"id"}},
}

// TestWALShapes: every shape's tables are mapped (their child tables get REPLICA IDENTITY
// FULL), and a sequence of changes that re-parent, re-key, empty groups, make outer join
// rows appear and vanish and cascade leaves every view equal to its SQL without a whole-
// view re-read.
func TestWALShapes(t *testing.T) {
	e := newEnv(t)
	e.exec(shapesSchema)
	r := start(t, e.walConfig(shapeViews...))
	r.waitReady(t)
	for _, v := range r.d.Status()[0].Views {
		deps := strings.Join(v.Dependencies, "\n")
		if strings.Contains(deps, "full re-read") {
			t.Errorf("%s re-reads in full:\n%s", v.Name, deps)
		}
	}
	var full []string
	if err := e.db.QueryRow(context.Background(), "SELECT array_agg(relname::text ORDER BY relname) FROM pg_class WHERE relreplident = 'f' AND relkind = 'r' AND relnamespace = 'public'::regnamespace").Scan(&full); err != nil {
		t.Fatal(err)
	}
	if strings.Join(full, ",") != "lines,picks" {
		t.Errorf("tables with REPLICA IDENTITY FULL: %v, want lines, picks (games and clubs map through their keys)", full)
	}
	for _, step := range []struct{ what, sql string }{
		{"a price", "UPDATE picks SET price = 100 WHERE id = 1001"},
		{"a renamed club (home of one game, away of another)", "UPDATE clubs SET name = 'Chelsea FC' WHERE id = 2"},
		{"a pick re-parented to another game's line", "UPDATE picks SET line_id = 110 WHERE id = 1010"},
		{"a line re-parented", "UPDATE lines SET game_id = 11 WHERE id = 101"},
		{"a line closed and one opened", "BEGIN; UPDATE lines SET open = false WHERE id = 100; UPDATE lines SET open = true WHERE id = 120; COMMIT"},
		{"a key changed", "UPDATE picks SET id = 1300 WHERE id = 1200"},
		{"a score appears and one vanishes", "BEGIN; INSERT INTO scores VALUES (10, 2, 2); DELETE FROM scores WHERE game_id = 12; COMMIT"},
		{"the last pick of a line deleted", "DELETE FROM picks WHERE id = 1300"},
		{"a game's status", "UPDATE games SET status = 'live' WHERE id = 11"},
		{"a new game with its lines and picks", "BEGIN; INSERT INTO games VALUES (13, 4, 1, 'open'); INSERT INTO lines VALUES (130, 13, 'winner', true); INSERT INTO picks VALUES (1301, 130, 111), (1302, 130, 99); COMMIT"},
		{"a game deleted with its cascade", "DELETE FROM games WHERE id = 10"},
		{"a club swapped in for the away side", "UPDATE games SET away_id = 2 WHERE id = 13"},
	} {
		e.exec(step.sql)
		e.waitConverged(t, step.what, shapeViews...)
	}
	recs := e.waitConverged(t, "the end", shapeViews...)
	for _, v := range shapeViews {
		if n := countEnds(recs, v.Name); n != 1 {
			t.Errorf("%s: %d epochs, want only the start-up one (every change mapped)", v.Name, n)
		}
	}
}
