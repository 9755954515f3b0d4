package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrStatement reports a view's SQL of more than one statement. Its errors name the view,
// without a package prefix: the callers wrap them in their own (ErrAnalyze, the
// distributor's ErrConfig).
var ErrStatement = errors.New("more than one statement")

// CheckStatement must be the first contact of a view's SQL with the server. The SQL is
// pasted into other statements and some of them go through the simple protocol (pgx sends
// an Exec without arguments that way, and so does every query on a connection configured
// with default_query_exec_mode=simple_protocol), which runs every statement of a string in
// turn: a view "SELECT 1 AS id; SELECT nextval('s')" would advance s before anything
// refused it. Here the SQL alone is parsed with the extended protocol (Parse, on the
// unnamed statement; nothing is planned or run), where PostgreSQL refuses more than one
// statement before it looks any further: that refusal is ErrStatement.
//
// Any other error is returned as it is (the server's), for the caller to report as it
// would have from its own statement; the SQL must then not be pasted into another one: a
// string that does not parse alone (a syntax error) might parse once it is. A SQL that
// parses alone as one statement stays one statement inside the parentheses of a
// subquery or after CREATE VIEW … AS: a ';' of its own could only sit where the
// grammar refuses it.
//
// conn must not be in a transaction the caller wants to keep: a failed Parse aborts it.
func CheckStatement(ctx context.Context, conn *pgconn.PgConn, view, sql string) error {
	_, err := conn.Prepare(ctx, "", sql, nil)
	if err == nil {
		return nil
	}
	if multipleStatements(err) {
		return fmt.Errorf("view %q: its SQL is %w (the server: %v)", view, ErrStatement, err)
	}
	return err
}

// multipleStatements reports PostgreSQL's refusal of a Parse message of several
// statements: a syntax error (42601) raised by exec_parse_message itself, which raises
// no other. The message is the fallback for a server that does not send the routine; it
// is English only, and a refusal it misses is still a refusal, reported as the server's
// error rather than as ErrStatement.
func multipleStatements(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42601" {
		return false
	}
	return pe.Routine == "exec_parse_message" || pe.Routine == "" && strings.Contains(pe.Message, "multiple commands")
}
