package capture

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements (a pgx.Tx, a pgx.Conn, a pgxpool.Pool).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EnsurePublication makes sure publication name publishes inserts, updates, deletes and
// truncates of every table in tables (partitioned tables through their root). A missing
// publication is created. An existing one that lacks a table gets it added when manage is
// set (the publication is statecast's own); otherwise the error names the table and the
// statement that fixes it.
func EnsurePublication(ctx context.Context, q Querier, name string, tables []*Table, manage bool) error {
	if err := CheckPublicationName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrAnalyze, err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	var all, ins, upd, del, trunc, viaRoot bool
	err := q.QueryRow(ctx, `SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot
		FROM pg_publication WHERE pubname = $1`, name).Scan(&all, &ins, &upd, &del, &trunc, &viaRoot)
	partitioned := slices.ContainsFunc(tables, func(t *Table) bool { return t.Partitioned })
	if err == pgx.ErrNoRows {
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = t.QualifiedName()
		}
		stmt := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert, update, delete, truncate', publish_via_partition_root = true)",
			ident, strings.Join(names, ", "))
		if _, err := q.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%w: create publication %s: %w (the distributor's role must own the tables, or create it: %s)", ErrAnalyze, name, err, stmt)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: publication %s: %w", ErrAnalyze, name, err)
	}
	var missingOps []string
	for _, op := range []struct {
		ok   bool
		name string
	}{{ins, "insert"}, {upd, "update"}, {del, "delete"}, {trunc, "truncate"}} {
		if !op.ok {
			missingOps = append(missingOps, op.name)
		}
	}
	if len(missingOps) > 0 {
		return fmt.Errorf("%w: publication %s does not publish %s (ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate'))",
			ErrAnalyze, name, strings.Join(missingOps, ", "), ident)
	}
	if partitioned && !viaRoot {
		return fmt.Errorf("%w: publication %s publishes partitions under their own names (ALTER PUBLICATION %s SET (publish_via_partition_root = true))", ErrAnalyze, name, ident)
	}
	if all {
		return nil
	}
	published := map[uint32]bool{}
	rows, err := q.Query(ctx, `SELECT format('%I.%I', schemaname, tablename)::regclass::oid FROM pg_publication_tables WHERE pubname = $1`, name)
	if err != nil {
		return fmt.Errorf("%w: publication %s: %w", ErrAnalyze, name, err)
	}
	for rows.Next() {
		var oid uint32
		if err := rows.Scan(&oid); err != nil {
			rows.Close()
			return err
		}
		published[oid] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var missing []string
	for _, t := range tables {
		if !published[t.OID] {
			missing = append(missing, t.QualifiedName())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	stmt := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", ident, strings.Join(missing, ", "))
	if !manage {
		return fmt.Errorf("%w: publication %s does not publish table(s) %s (%s)", ErrAnalyze, name, strings.Join(missing, ", "), stmt)
	}
	if _, err := q.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrAnalyze, stmt, err)
	}
	return nil
}

// SetReplicaIdentityFull makes pgoutput send table t's old rows whole (ALTER TABLE …
// REPLICA IDENTITY FULL): the old values of the columns a view maps its changes through
// (a child's parent, a partition column). It waits at most 5 s for the table's lock.
func SetReplicaIdentityFull(ctx context.Context, q Querier, t *Table) error {
	stmt := "ALTER TABLE " + t.QualifiedName() + " REPLICA IDENTITY FULL"
	if _, err := q.Exec(ctx, "SET lock_timeout = '5s'"); err != nil {
		return err
	}
	defer func() { _, _ = q.Exec(context.WithoutCancel(ctx), "RESET lock_timeout") }()
	if _, err := q.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}
