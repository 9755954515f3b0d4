-- statecast demo: a small sportsbook. Loaded by `cachectl dev` (make demo) into a fresh
-- database. The distributor captures its changes from the WAL (the server runs with
-- wal_level = logical): nothing in the schema is there for statecast but the primary keys,
-- which identify the changed rows (their replica identity).

CREATE TABLE sports (
	id         integer PRIMARY KEY,
	name       text NOT NULL
);

CREATE TABLE competitions (
	id         integer PRIMARY KEY,
	sport_id   integer NOT NULL REFERENCES sports,
	name       text NOT NULL,
	country    text
);

CREATE TYPE event_status AS ENUM ('scheduled', 'live', 'finished', 'cancelled');

CREATE TABLE events (
	id             bigint PRIMARY KEY,
	competition_id integer NOT NULL REFERENCES competitions,
	name           text NOT NULL,
	home           text NOT NULL,
	away           text NOT NULL,
	starts_at      timestamptz NOT NULL,
	status         event_status NOT NULL DEFAULT 'scheduled',
	tags           text[] NOT NULL DEFAULT '{}',
	info           jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE markets (
	id         bigint PRIMARY KEY,
	event_id   bigint NOT NULL REFERENCES events ON DELETE CASCADE,
	name       text NOT NULL,
	suspended  boolean NOT NULL DEFAULT false
);

CREATE TABLE selections (
	id         bigint PRIMARY KEY,
	market_id  bigint NOT NULL REFERENCES markets ON DELETE CASCADE,
	name       text NOT NULL,
	price      numeric(8,3) NOT NULL
);

-- Seed data.
INSERT INTO sports (id, name) VALUES (1, 'Football'), (2, 'Tennis'), (3, 'Basketball');

INSERT INTO competitions (id, sport_id, name, country) VALUES
	(10, 1, 'Premier League', 'GB'),
	(11, 1, 'Ligue 1', 'FR'),
	(12, 1, 'Bundesliga', 'DE'),
	(20, 2, 'Roland-Garros', 'FR'),
	(30, 3, 'EuroLeague', NULL);

INSERT INTO events (id, competition_id, name, home, away, starts_at, tags, info)
SELECT 1000 + i, (ARRAY[10, 11, 12, 20, 30])[1 + i % 5], home || ' v ' || away, home, away,
	timestamptz '2026-12-01 15:00:00+00' + (i * interval '90 minutes'),
	CASE WHEN i % 4 = 0 THEN ARRAY['featured'] ELSE '{}' END,
	jsonb_build_object('venue', home || ' Arena', 'round', 1 + i / 5)
FROM (
	SELECT i, t[1 + i % 5][1 + (i / 5) % 4] AS home, t[1 + i % 5][1 + (i / 5 + 1) % 4] AS away
	FROM generate_series(0, 19) AS i, (SELECT ARRAY[
		['Arsenal', 'Liverpool', 'Chelsea', 'Spurs'],
		['Paris', 'Marseille', 'Lyon', 'Lille'],
		['München', 'Dortmund', 'Leipzig', 'Bayer 04'],
		['Nadal', 'Djokovic', 'Świątek', 'Gauff'],
		['Real Madrid', 'Olympiacos', 'Fenerbahçe', 'Žalgiris']] AS t) AS teams
) AS e;

INSERT INTO markets (id, event_id, name)
SELECT e.id * 10 + m.n, e.id, m.name
FROM events e, (VALUES (1, 'Match Odds'), (2, 'Over/Under 2.5'), (3, 'Both Teams To Score')) AS m(n, name);

INSERT INTO selections (id, market_id, name, price)
SELECT m.id * 10 + s.n, m.id, s.name, round((1.2 + ((m.id * 7 + s.n * 13) % 50) / 10.0)::numeric, 3)
FROM markets m, (VALUES (1, 'Home'), (2, 'Draw'), (3, 'Away')) AS s(n, name)
WHERE m.name = 'Match Odds'
UNION ALL
SELECT m.id * 10 + s.n, m.id, s.name, round((1.5 + ((m.id * 11 + s.n * 5) % 20) / 10.0)::numeric, 3)
FROM markets m, (VALUES (1, 'Yes'), (2, 'No')) AS s(n, name)
WHERE m.name <> 'Match Odds';
