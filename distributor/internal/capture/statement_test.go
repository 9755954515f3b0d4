package capture

import (
	"errors"
	"strings"
	"testing"
)

// TestAnalyzeRunsNoSecondStatement: a view whose SQL holds a second statement is refused
// with ErrStatement before anything of it runs: the sequence the second statement would
// advance is where it was (Analyze used to paste the SQL into CREATE TEMPORARY VIEW,
// sent through the simple protocol, which ran both).
func TestAnalyzeRunsNoSecondStatement(t *testing.T) {
	ctx, conn, _ := openDB(t)
	mustExec(ctx, t, conn, "CREATE SEQUENCE s")
	for _, tc := range []struct {
		sql     string
		refusal error
	}{
		{"SELECT 1 AS id; SELECT nextval('s')", ErrStatement},
		// closes the parenthesis of a subquery it is pasted into: alone it does not parse
		{"SELECT 1 AS id) AS x; SELECT nextval('s'); SELECT * FROM (SELECT 1", ErrAnalyze},
	} {
		sql := tc.sql
		_, err := analyze(ctx, t, conn, ViewSpec{Name: "v", SQL: sql, Key: []string{"id"}})
		if !errors.Is(err, tc.refusal) || !errors.Is(err, ErrAnalyze) {
			t.Errorf("%s: %v, want %v", sql, err, tc.refusal)
		}
		var called bool
		if err := conn.QueryRow(ctx, "SELECT is_called FROM s").Scan(&called); err != nil {
			t.Fatal(err)
		}
		if called {
			t.Fatalf("%s: nextval ran", sql)
		}
	}
	if err := CheckStatement(ctx, conn.PgConn(), "v", "SELECT id FROM sports"); err != nil {
		t.Errorf("one statement: %v", err)
	}
	for _, sql := range []string{"SELECT id FROM nosuch", "SELEC 1", "SELECT 1 AS id) AS x; SELECT 2; SELECT (1"} {
		if err := CheckStatement(ctx, conn.PgConn(), "v", sql); err == nil || errors.Is(err, ErrStatement) {
			t.Errorf("%s: %v, want the server's error, not ErrStatement", sql, err)
		}
	}
	err := CheckStatement(ctx, conn.PgConn(), "v", "SELECT 1; SELECT 2")
	if !errors.Is(err, ErrStatement) || !strings.Contains(err.Error(), `view "v": its SQL is more than one statement`) {
		t.Errorf("two statements: %v", err)
	}
}
