package distributor

// The differential test's schema and corpus of view shapes (difftest_test.go runs them).
// A shape is one line of diffCorpus: a name, the SQL and the key. The SQL may read any
// table or database view of diffSchema; the key must be unique in the view.

// diffSchema is a sportsbook: events of a sport between a home team and an optional away
// team (a nullable foreign key), their markets and the markets' selections (cascading
// deletes and key updates), an optional score per event (a LEFT JOIN's rows appear and
// vanish), and database views over a three-table aggregate, nested three deep.
const diffSchema = `
CREATE TABLE sports (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE teams (id int PRIMARY KEY, name text NOT NULL, rating int NOT NULL);
CREATE TABLE events (
	id int PRIMARY KEY,
	sport_id int NOT NULL REFERENCES sports ON DELETE CASCADE ON UPDATE CASCADE,
	home_id int NOT NULL REFERENCES teams ON UPDATE CASCADE,
	away_id int REFERENCES teams ON DELETE SET NULL ON UPDATE CASCADE,
	status text NOT NULL,
	starts_at timestamptz NOT NULL);
CREATE TABLE markets (
	id int PRIMARY KEY,
	event_id int NOT NULL REFERENCES events ON DELETE CASCADE ON UPDATE CASCADE,
	name text NOT NULL,
	status text NOT NULL);
CREATE TABLE selections (
	id int PRIMARY KEY,
	market_id int NOT NULL REFERENCES markets ON DELETE CASCADE ON UPDATE CASCADE,
	price numeric(6,2) NOT NULL,
	status text NOT NULL);
CREATE TABLE scores (
	event_id int PRIMARY KEY REFERENCES events ON DELETE CASCADE ON UPDATE CASCADE,
	home int NOT NULL,
	away int NOT NULL);
-- An odds feed's sequence number, which only the bursts of transactions change.
CREATE TABLE feed (id int PRIMARY KEY, seq bigint NOT NULL);

CREATE VIEW event_board AS
	SELECT e.id AS event_id, e.status, count(DISTINCT m.id) AS markets, count(s.id) AS selections, min(s.price) AS best_price
	FROM events e LEFT JOIN markets m ON m.event_id = e.id LEFT JOIN selections s ON s.market_id = m.id
	GROUP BY e.id, e.status;
CREATE VIEW open_board AS SELECT * FROM event_board WHERE status = 'open';
CREATE VIEW hot_board AS SELECT event_id, markets, best_price FROM open_board WHERE markets > 0;
CREATE VIEW fixtures AS
	SELECT e.id AS event_id, h.id AS home_id, h.name AS home, e.away_id, a.name AS away
	FROM events e JOIN teams h ON h.id = e.home_id LEFT JOIN teams a ON a.id = e.away_id;
CREATE VIEW event_home AS
	SELECT e.id AS event_id, h.name AS home FROM events e JOIN teams h ON h.id = e.home_id;
`

// diffFixture is the state every check starts from (after a TRUNCATE of every table, in
// the same transaction): every id range of diffOps has rows present and free ids, event 3
// and 6 have no away team, event 6 no market, market 6 no selection.
const diffFixture = `
INSERT INTO sports VALUES (1, 'soccer'), (2, 'tennis'), (3, 'golf');
INSERT INTO teams VALUES (1, 'lions', 3), (2, 'tigers', 1), (3, 'bears', 2), (4, 'wolves', 0), (5, 'hawks', 2), (6, 'owls', 1);
INSERT INTO events VALUES
	(1, 1, 1, 2, 'open', '2026-05-01 18:00Z'),
	(2, 1, 3, 4, 'open', '2026-05-01 20:00Z'),
	(3, 2, 5, NULL, 'closed', '2026-05-02 12:00Z'),
	(4, 2, 2, 1, 'suspended', '2026-05-02 15:00Z'),
	(5, 3, 6, 3, 'open', '2026-05-03 09:00Z'),
	(6, 1, 4, NULL, 'open', '2026-05-03 19:30Z');
INSERT INTO markets VALUES
	(1, 1, 'winner', 'open'), (2, 1, 'total', 'suspended'), (3, 2, 'winner', 'open'), (4, 2, 'total', 'closed'),
	(5, 3, 'winner', 'open'), (6, 4, 'winner', 'open'), (7, 4, 'total', 'open'), (8, 5, 'winner', 'open'),
	(9, 5, 'handicap', 'open'), (10, 1, 'handicap', 'closed');
INSERT INTO selections VALUES
	(1, 1, 1.50, 'open'), (2, 1, 2.25, 'open'), (3, 1, 5.00, 'suspended'), (4, 2, 1.90, 'open'),
	(5, 2, 1.90, 'open'), (6, 3, 3.10, 'open'), (7, 3, 1.25, 'open'), (8, 4, 2.00, 'closed'),
	(9, 5, 1.75, 'open'), (10, 7, 2.50, 'open'), (11, 7, 1.60, 'suspended'), (12, 8, 4.00, 'open'),
	(13, 9, 1.95, 'open'), (14, 9, 1.95, 'open'), (15, 10, 3.30, 'open'), (16, 1, 1.50, 'open');
INSERT INTO scores VALUES (1, 1, 0), (4, 2, 2);
INSERT INTO feed VALUES (1, 0);
`

// diffView is one shape of the corpus. known, when set, says how the current mapping
// diverges on the shape: such a view is left out of TestWALDifferential's runs (its
// minimal case is in difftest_known_test.go) unless STATECAST_DIFF_ALL is set.
type diffView struct {
	name, sql string
	key       []string
	depends   map[string][]string // ViewConfig.Depends
	known     string
}

var diffCorpus = []diffView{
	{name: "sports", sql: `SELECT id, name FROM sports`, key: []string{"id"}},
	{name: "feed", sql: `SELECT id, seq FROM feed`, key: []string{"id"}},
	{name: "open_markets", sql: `SELECT id, event_id, name FROM markets WHERE status = 'open'`, key: []string{"id"}},
	{name: "market_events", sql: `SELECT m.id, m.name, m.status, e.id AS event_id, e.status AS event_status, e.starts_at
		FROM markets m JOIN events e ON e.id = m.event_id`, key: []string{"id"}},
	{name: "market_events_declared", sql: `SELECT m.id, m.event_id, e.status AS event_status, e.sport_id
		FROM markets m JOIN events e ON e.id = m.event_id`, key: []string{"id"}, depends: map[string][]string{"events": {"event_id"}}},
	{name: "selection_paths", sql: `SELECT s.id, s.price, m.id AS market_id, m.name AS market, e.id AS event_id, sp.id AS sport_id, sp.name AS sport
		FROM selections s JOIN markets m ON m.id = s.market_id JOIN events e ON e.id = m.event_id JOIN sports sp ON sp.id = e.sport_id
		WHERE e.status <> 'closed'`, key: []string{"id"}},
	{name: "event_scores", sql: `SELECT e.id, e.status, sc.event_id AS scored, sc.home, sc.away
		FROM events e LEFT JOIN scores sc ON sc.event_id = e.id`, key: []string{"id"}},
	{name: "unscored_events", sql: `SELECT e.id, e.status, sc.event_id AS scored
		FROM events e LEFT JOIN scores sc ON sc.event_id = e.id WHERE sc.event_id IS NULL`, key: []string{"id"}},
	{name: "away_teams", sql: `SELECT e.id, a.id AS away_id, a.name AS away, a.rating
		FROM events e LEFT JOIN teams a ON a.id = e.away_id`, key: []string{"id"}},
	{name: "event_teams", sql: `SELECT e.id, h.id AS home_id, h.name AS home, a.id AS away_id, a.name AS away
		FROM events e JOIN teams h ON h.id = e.home_id LEFT JOIN teams a ON a.id = e.away_id`, key: []string{"id"}},
	{name: "market_counts", sql: `SELECT e.id AS event_id, count(m.id) AS markets, count(m.id) FILTER (WHERE m.status = 'open') AS open_markets
		FROM events e LEFT JOIN markets m ON m.event_id = e.id GROUP BY e.id`, key: []string{"event_id"}},
	{name: "sport_market_counts", sql: `SELECT e.id AS event_id, sp.id AS sport_id, sp.name AS sport, count(m.id) AS markets
		FROM events e JOIN sports sp ON sp.id = e.sport_id LEFT JOIN markets m ON m.event_id = e.id GROUP BY e.id, sp.id`, key: []string{"event_id"}},
	{name: "markets_per_event", sql: `SELECT event_id, count(*) AS markets, max(name) AS last_name FROM markets GROUP BY event_id`, key: []string{"event_id"}},
	{name: "event_selections", sql: `SELECT e.id AS event_id, count(s.id) AS selections, min(s.price) AS best, sum(s.price) AS total
		FROM events e JOIN markets m ON m.event_id = e.id JOIN selections s ON s.market_id = m.id GROUP BY e.id`, key: []string{"event_id"}},
	{name: "events_with_open_markets", sql: `SELECT e.id, e.status FROM events e
		WHERE EXISTS (SELECT 1 FROM markets m WHERE m.event_id = e.id AND m.status = 'open')`, key: []string{"id"}},
	{name: "markets_without_open_selections", sql: `SELECT m.id, m.event_id FROM markets m
		WHERE NOT EXISTS (SELECT 1 FROM selections s WHERE s.market_id = m.id AND s.status = 'open')`, key: []string{"id"}},
	{name: "markets_of_open_events", sql: `SELECT m.id, m.name FROM markets m
		WHERE m.event_id IN (SELECT id FROM events WHERE status = 'open')`, key: []string{"id"}},
	{name: "participants", sql: `SELECT 'home' AS side, e.id AS event_id, e.home_id AS team_id FROM events e
		UNION ALL SELECT 'away', e.id, e.away_id FROM events e WHERE e.away_id IS NOT NULL`, key: []string{"side", "event_id"}},
	{name: "offers", sql: `SELECT 'market' AS kind, id, status FROM markets
		UNION ALL SELECT 'selection', id, status FROM selections`, key: []string{"kind", "id"}},
	{name: "price_ranks", sql: `SELECT s.id, s.market_id, s.price, rank() OVER (PARTITION BY s.market_id ORDER BY s.price) AS rank
		FROM selections s`, key: []string{"id"}},
	{name: "cheapest", sql: `SELECT DISTINCT ON (s.market_id) s.market_id, s.id AS selection_id, s.price
		FROM selections s WHERE s.status = 'open' ORDER BY s.market_id, s.price, s.id`, key: []string{"market_id"}},
	{name: "market_top", sql: `SELECT m.id, x.id AS selection_id, x.price FROM markets m
		LEFT JOIN LATERAL (SELECT s.id, s.price FROM selections s WHERE s.market_id = m.id ORDER BY s.price, s.id LIMIT 1) x ON true`, key: []string{"id"}},
	{name: "market_best", sql: `SELECT m.id, m.name,
		(SELECT min(s.price) FROM selections s WHERE s.market_id = m.id AND s.status = 'open') AS best FROM markets m`, key: []string{"id"}},
	{name: "selection_counts", sql: `WITH n AS (SELECT market_id, count(*) AS n FROM selections GROUP BY market_id)
		SELECT m.id, m.name, coalesce(n.n, 0) AS selections FROM markets m LEFT JOIN n ON n.market_id = m.id`, key: []string{"id"}},
	{name: "open_siblings", sql: `WITH om AS (SELECT id, event_id FROM markets WHERE status = 'open')
		SELECT a.id, a.event_id, count(b.id) AS siblings FROM om a LEFT JOIN om b ON b.event_id = a.event_id AND b.id <> a.id
		GROUP BY a.id, a.event_id`, key: []string{"id"}},
	{name: "board", sql: `SELECT event_id, status, markets, selections, best_price FROM event_board`, key: []string{"event_id"}},
	{name: "hot", sql: `SELECT event_id, markets, best_price FROM hot_board`, key: []string{"event_id"}},
	{name: "market_boards", sql: `SELECT m.id, m.status, b.markets, b.best_price FROM markets m JOIN event_board b ON b.event_id = m.event_id`, key: []string{"id"}},
	{name: "fixtures", sql: `SELECT event_id, home_id, home, away_id, away FROM fixtures`, key: []string{"event_id"}},
	{name: "home_and_away", sql: `SELECT eh.event_id, eh.home, a.id AS away_id, a.name AS away
		FROM event_home eh JOIN events e ON e.id = eh.event_id LEFT JOIN teams a ON a.id = e.away_id`, key: []string{"event_id"}},
}
