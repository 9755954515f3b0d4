package capture

import (
	"strings"
	"testing"
)

// shapeSchema is a sportsbook whose child tables have REPLICA IDENTITY FULL (pgoutput
// then sends their old rows whole, so a change maps through any column), a nullable
// one-to-one child, a table named twice, and database views three deep.
const shapeSchema = `
CREATE TABLE clubs (id int PRIMARY KEY, name text);
CREATE TABLE games (id int PRIMARY KEY, home_id int REFERENCES clubs, away_id int REFERENCES clubs, status text);
CREATE TABLE lines (id int PRIMARY KEY, game_id int REFERENCES games, name text, open bool);
CREATE TABLE picks (id int PRIMARY KEY, line_id int REFERENCES lines, price numeric);
CREATE TABLE scores (game_id int PRIMARY KEY REFERENCES games, home int, away int);
ALTER TABLE lines REPLICA IDENTITY FULL;
ALTER TABLE picks REPLICA IDENTITY FULL;
CREATE VIEW board AS SELECT g.id, g.status, count(l.id) AS lines, count(p.id) AS picks
	FROM games g JOIN lines l ON l.game_id = g.id JOIN picks p ON p.line_id = l.id GROUP BY g.id;
CREATE VIEW board2 AS SELECT * FROM board WHERE lines > 0;
CREATE VIEW board3 AS SELECT b.id, b.lines FROM board2 b;
`

// TestAnalyzeShapes: the shapes services write, each table of each view mapped (or not)
// as the derivation over PostgreSQL's query tree says; "~" marks a mapping through joins.
func TestAnalyzeShapes(t *testing.T) {
	ctx, conn, _ := openDB(t)
	mustExec(ctx, t, conn, shapeSchema)
	tests := []struct {
		name, sql string
		key       []string
		want      string
		why       string
	}{
		{"view over a database view over a view over a view", "SELECT id, lines FROM board3", []string{"id"},
			"games=id(key) lines=id(key) picks=id(key)~", ""},
		{"grouped aggregate of children by the parent's key",
			"SELECT g.id, count(l.id) AS n FROM games g LEFT JOIN lines l ON l.game_id = g.id GROUP BY g.id", []string{"id"},
			"games=id(key) lines=id(key)", ""},
		{"children grouped by their own column", "SELECT game_id, count(*) AS n FROM lines GROUP BY game_id", []string{"game_id"},
			"lines=game_id(key)", ""},
		{"grandchild aggregate", "SELECT g.id, count(p.id) AS n FROM games g JOIN lines l ON l.game_id = g.id JOIN picks p ON p.line_id = l.id GROUP BY g.id", []string{"id"},
			"games=id(key) lines=id(key) picks=id(key)~", ""},
		{"a table named twice", "SELECT g.id, h.name AS home, a.name AS away FROM games g JOIN clubs h ON h.id = g.home_id JOIN clubs a ON a.id = g.away_id", []string{"id"},
			"clubs=id(key)~|id(key)~ games=id(key)", ""},
		{"EXISTS", "SELECT g.id, g.status FROM games g WHERE EXISTS (SELECT 1 FROM lines l WHERE l.game_id = g.id AND l.open)", []string{"id"},
			"games=id(key) lines=id(key)", ""},
		{"NOT EXISTS over a join", "SELECT g.id FROM games g WHERE NOT EXISTS (SELECT 1 FROM lines l JOIN picks p ON p.line_id = l.id WHERE l.game_id = g.id)", []string{"id"},
			"games=id(key) lines=id(key) picks=id(key)~", ""},
		{"IN a subquery", "SELECT g.id FROM games g WHERE g.id IN (SELECT game_id FROM lines WHERE open)", []string{"id"},
			"games=id(key) lines=id(key)", ""},
		{"IN a subquery, two columns", "SELECT g.id FROM games g WHERE (g.id, g.status) IN (SELECT game_id, name FROM lines WHERE open)", []string{"id"},
			"games=id(key) lines=id(key)", ""},
		{"a join's equality inside a nested AND", "SELECT l.id, l.game_id, g.status FROM games g, lines l WHERE g.status <> 'closed' AND (l.open AND l.game_id = g.id)", []string{"id"},
			"games=game_id lines=id(key)", ""},
		{"UNION ALL", "SELECT 'g' AS kind, id, status AS label FROM games UNION ALL SELECT 'l', id, name FROM lines", []string{"kind", "id"},
			"games=id lines=id+label", ""},
		{"window function partitioned by a key", "SELECT p.id, p.line_id, rank() OVER (PARTITION BY p.line_id ORDER BY p.price) AS r FROM picks p", []string{"id"},
			"picks=line_id", ""},
		{"DISTINCT ON per group", "SELECT DISTINCT ON (p.line_id) p.line_id, p.id, p.price FROM picks p ORDER BY p.line_id, p.price, p.id", []string{"line_id"},
			"picks=line_id(key)", ""},
		{"scalar subquery", "SELECT l.id, (SELECT count(*) FROM picks p WHERE p.line_id = l.id) AS n FROM lines l", []string{"id"},
			"lines=id(key) picks=id(key)", ""},
		{"CTE joined back", "WITH best AS (SELECT line_id, min(price) AS price FROM picks GROUP BY line_id) SELECT l.id, l.name, b.price FROM lines l JOIN best b ON b.line_id = l.id", []string{"id"},
			"lines=id(key) picks=id(key)", ""},
		{"LEFT JOIN of a nullable child", "SELECT g.id, s.home, s.away FROM games g LEFT JOIN scores s ON s.game_id = g.id", []string{"id"},
			"games=id(key) scores=id(key)", ""},
		{"LATERAL top-N per group", "SELECT g.id, t.id AS line FROM games g, LATERAL (SELECT l.id FROM lines l WHERE l.game_id = g.id ORDER BY l.id LIMIT 2) t", []string{"line"},
			"games=id lines=id", ""},
		{"LIMIT without a partition", "SELECT id FROM lines ORDER BY id LIMIT 5", []string{"id"},
			"lines=-", "LIMIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := analyze(ctx, t, conn, ViewSpec{Name: "v", SQL: tt.sql, Key: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(d); got != tt.want {
				t.Fatalf("mappings = %q, want %q\n%s", got, tt.want, strings.Join(d.Describe(), "\n"))
			}
			if tt.why != "" {
				for _, r := range d.Unmapped {
					if strings.Contains(r, tt.why) {
						return
					}
				}
				t.Fatalf("reasons %v lack %q", d.Unmapped, tt.why)
			}
		})
	}
}
