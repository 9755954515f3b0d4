package capture

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const schema = `
CREATE TABLE sports (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE competitions (id int PRIMARY KEY, sport_id int NOT NULL REFERENCES sports, name text NOT NULL);
CREATE TABLE events (id bigint PRIMARY KEY, competition_id int NOT NULL REFERENCES competitions, name text NOT NULL);
CREATE TABLE markets (id bigint PRIMARY KEY, event_id bigint NOT NULL REFERENCES events ON DELETE CASCADE, name text NOT NULL, price numeric);
CREATE TABLE teams (code text, season int, name text, PRIMARY KEY (code, season));
CREATE TABLE nokey (a int, b text);
CREATE TABLE nothing (id int PRIMARY KEY, v text);
ALTER TABLE nothing REPLICA IDENTITY NOTHING;
CREATE TABLE byindex (id int PRIMARY KEY, code text NOT NULL, v text);
CREATE UNIQUE INDEX byindex_code ON byindex (code);
ALTER TABLE byindex REPLICA IDENTITY USING INDEX byindex_code;
CREATE TABLE full_nokey (a int, b text);
ALTER TABLE full_nokey REPLICA IDENTITY FULL;
CREATE VIEW open_events AS SELECT id, competition_id, name FROM events;
CREATE MATERIALIZED VIEW event_counts AS SELECT competition_id, count(*) AS n FROM events GROUP BY 1;
`

// openDB creates a database with the test schema and returns a connection to it and its DSN.
func openDB(t *testing.T) (context.Context, *pgx.Conn, string) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	return ctx, conn, dsn
}

func analyze(ctx context.Context, t *testing.T, conn *pgx.Conn, v ViewSpec) (*ViewDeps, error) {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	return Analyze(ctx, tx, v)
}

// describe renders the mapping of each table as "table=cols" ("table=-" when unmapped).
func describe(d *ViewDeps) string {
	var parts []string
	for _, t := range d.Tables {
		ms := d.Maps[t.OID]
		if ms == nil {
			parts = append(parts, t.String()+"=-")
			continue
		}
		var each []string
		for _, m := range ms {
			var cols []string
			for _, c := range m.Cols {
				cols = append(cols, d.Columns[c].Name)
			}
			s := strings.Join(cols, "+")
			if m.IsKey {
				s += "(key)"
			}
			if len(m.Hops) > 0 {
				s += "~"
			}
			each = append(each, s)
		}
		parts = append(parts, t.String()+"="+strings.Join(each, "|"))
	}
	return strings.Join(parts, " ")
}

func TestAnalyzeMappings(t *testing.T) {
	ctx, conn, _ := openDB(t)
	tests := []struct {
		name string
		v    ViewSpec
		want string
		why  string // a substring of the first unmapped table's reason
	}{
		{"single table", ViewSpec{SQL: "SELECT id, name FROM sports WHERE name <> ''", Key: []string{"id"}},
			"sports=id(key)", ""},
		{"three-table join with every identity selected",
			ViewSpec{SQL: `SELECT m.id, m.name, e.id AS event_id, c.id AS comp_id, c.name AS comp
				FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`, Key: []string{"id"}},
			"competitions=comp_id events=event_id markets=id(key)", ""},
		{"join whose parent identity is not selected: by the column the join equates to it",
			ViewSpec{SQL: `SELECT e.id, e.competition_id, c.name FROM events e JOIN competitions c ON c.id = e.competition_id`, Key: []string{"id"}},
			"competitions=competition_id events=id(key)", ""},
		{"the same, declared in depends",
			ViewSpec{SQL: `SELECT e.id, e.competition_id, c.name FROM events e JOIN competitions c ON c.id = e.competition_id`, Key: []string{"id"},
				Depends: map[string][]string{"competitions": {"competition_id"}}},
			"competitions=competition_id events=id(key)", ""},
		{"a parent reached only through the join: by the key, through the children",
			ViewSpec{SQL: `SELECT e.id, c.name FROM events e JOIN competitions c ON c.id = e.competition_id`, Key: []string{"id"}},
			"competitions=id(key)~ events=id(key)", ""},
		{"composite identity in another order than the key",
			ViewSpec{SQL: `SELECT season, code, name FROM teams`, Key: []string{"season", "code"}},
			"teams=season+code(key)", ""},
		{"self-join: each occurrence by its own columns", ViewSpec{SQL: `SELECT a.id, a.name, b.id AS other FROM sports a JOIN sports b ON b.id = a.id + 1`, Key: []string{"id"}},
			"sports=id(key)|other", ""},
		{"window function over all rows", ViewSpec{SQL: `SELECT id, rank() OVER (ORDER BY name) AS r FROM sports`, Key: []string{"id"}},
			"sports=-", "a window function not partitioned"},
		{"distinct on a column outside the replica identity", ViewSpec{SQL: `SELECT DISTINCT ON (competition_id) id, competition_id FROM events ORDER BY competition_id, id`, Key: []string{"id"}},
			"events=-", "REPLICA IDENTITY FULL"},
		{"limit", ViewSpec{SQL: `SELECT id FROM sports ORDER BY name LIMIT 10`, Key: []string{"id"}},
			"sports=-", "LIMIT"},
		{"union all: each branch by its own columns", ViewSpec{SQL: `SELECT id FROM sports UNION ALL SELECT id FROM competitions`, Key: []string{"id"}},
			"competitions=id(key) sports=id(key)", ""},
		{"aggregate of children under the default replica identity", ViewSpec{SQL: `SELECT c.id, count(e.id) AS n FROM competitions c LEFT JOIN events e ON e.competition_id = c.id GROUP BY c.id`, Key: []string{"id"}},
			"competitions=id(key) events=-", "REPLICA IDENTITY FULL"},
		{"through a view", ViewSpec{SQL: `SELECT v.id, v.name, c.id AS cid FROM open_events v JOIN competitions c ON c.id = v.competition_id`, Key: []string{"id"}},
			"competitions=cid events=id(key)", ""},
		{"recursive", ViewSpec{SQL: `WITH RECURSIVE r(id) AS (SELECT id FROM sports UNION SELECT s.id + 1 FROM r JOIN sports s ON s.id = r.id) SELECT id FROM r`, Key: []string{"id"}},
			"sports=-", "recursive"},
		{"aggregate over all rows", ViewSpec{SQL: `SELECT count(*) AS n, 1 AS k FROM sports`, Key: []string{"k"}},
			"sports=-", "an aggregate over all rows"},
		{"uncorrelated subquery", ViewSpec{SQL: `SELECT id FROM markets WHERE price > (SELECT avg(price) FROM markets)`, Key: []string{"id"}},
			"markets=-", "an aggregate over all rows"},
		{"replica identity index", ViewSpec{SQL: `SELECT id, code, v FROM byindex`, Key: []string{"id"}},
			"byindex=code", ""},
		{"extra table", ViewSpec{SQL: `SELECT id, name FROM sports`, Key: []string{"id"}, Tables: []string{"teams"}},
			"sports=id(key) teams=-", "declared in tables"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.v.Name = "v"
			d, err := analyze(ctx, t, conn, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(d); got != tt.want {
				t.Fatalf("mappings = %q, want %q\n%s", got, tt.want, strings.Join(d.Describe(), "\n"))
			}
			if tt.why != "" {
				var reasons []string
				for _, r := range d.Unmapped {
					reasons = append(reasons, r)
				}
				if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, tt.why) }) {
					t.Fatalf("reasons %q lack %q", reasons, tt.why)
				}
			}
		})
	}
}

func TestAnalyzeRefusals(t *testing.T) {
	ctx, conn, _ := openDB(t)
	tests := []struct {
		v    ViewSpec
		want string
	}{
		{ViewSpec{SQL: "SELECT a, b FROM nokey", Key: []string{"a"}}, "nokey, which has no primary key and REPLICA IDENTITY DEFAULT"},
		{ViewSpec{SQL: "SELECT id, v FROM nothing", Key: []string{"id"}}, "REPLICA IDENTITY NOTHING"},
		{ViewSpec{SQL: "SELECT competition_id, n FROM event_counts", Key: []string{"competition_id"}}, "materialized view public.event_counts"},
		{ViewSpec{SQL: "SELECT id FROM sports", Key: []string{"nope"}}, `key column "nope"`},
		{ViewSpec{SQL: "SELECT id FROM nosuchtable", Key: []string{"id"}}, "cannot define a view"},
		{ViewSpec{SQL: "SELECT id, name FROM sports", Key: []string{"id"}, Depends: map[string][]string{"teams": {"id"}}}, "teams has 2 identity column(s) (code, season), 1 given"},
		{ViewSpec{SQL: "SELECT e.id, c.name FROM events e JOIN competitions c ON c.id = e.competition_id", Key: []string{"id"},
			Depends: map[string][]string{"competitions": {"name"}}}, "does not have the type of competitions.id"},
	}
	for _, tt := range tests {
		tt.v.Name = "v"
		_, err := analyze(ctx, t, conn, tt.v)
		if err == nil || !errors.Is(err, ErrAnalyze) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want ErrAnalyze containing %q", tt.v.SQL, err, tt.want)
		}
	}
	// FULL without a key: every column is the identity and every old value is sent, so the
	// view's key column maps it.
	d, err := analyze(ctx, t, conn, ViewSpec{Name: "v", SQL: "SELECT a, b FROM full_nokey", Key: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(d); got != "full_nokey=a(key)" {
		t.Fatalf("full_nokey mapping = %q", got)
	}
}

// TestAnalyzeDefinition: the definition two analyses compare ignores the SQL's layout,
// and changes when a `SELECT *` gains a column or a database view it reads is redefined.
func TestAnalyzeDefinition(t *testing.T) {
	ctx, conn, _ := openDB(t)
	def := func(sql string) string {
		t.Helper()
		d, err := analyze(ctx, t, conn, ViewSpec{Name: "v", SQL: sql, Key: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Definition
	}
	a := def("SELECT id, name FROM sports WHERE name <> ''")
	if b := def("SELECT id,\n\tname\nFROM   sports   WHERE name <> ''"); a != b {
		t.Errorf("the layout changed the definition:\n%s\n%s", a, b)
	}
	if b := def("SELECT id, name FROM sports WHERE name <> 'x'"); a == b {
		t.Errorf("another WHERE, the same definition: %s", a)
	}
	star := def("SELECT * FROM sports")
	mustExec(ctx, t, conn, "ALTER TABLE sports ADD COLUMN code text")
	if b := def("SELECT * FROM sports"); b == star {
		t.Errorf("SELECT * over a table that gained a column, the same definition: %s", b)
	}
	mustExec(ctx, t, conn, "CREATE VIEW named_sports AS SELECT id, name FROM sports")
	before := def("SELECT id, name FROM named_sports")
	mustExec(ctx, t, conn, "CREATE OR REPLACE VIEW named_sports AS SELECT id, upper(name) AS name FROM sports")
	if b := def("SELECT id, name FROM named_sports"); b == before {
		t.Errorf("a database view redefined, the same definition: %s", b)
	}
}
