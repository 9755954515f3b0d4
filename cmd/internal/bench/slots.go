package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A logical replication slot keeps every WAL segment from its position on until it is
// dropped, and a database whose slot is in use cannot be dropped: every slot a benchmark
// creates, or makes a distributor create, is dropped before it returns.

// CreateSlot creates a logical replication slot with the output plugin (pgoutput) in the
// database conn is connected to and returns its consistent point. PostgreSQL waits for
// the transactions running on the server to end first.
func CreateSlot(ctx context.Context, conn *pgx.Conn, name, plugin string) (lsn string, err error) {
	err = conn.QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, $2)", name, plugin).Scan(&lsn)
	if err != nil {
		return "", fmt.Errorf("bench: create slot %s: %w", name, err)
	}
	return lsn, nil
}

// Slots lists the replication slots of database db.
func Slots(ctx context.Context, conn *pgx.Conn, db string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT slot_name::text FROM pg_replication_slots WHERE database = $1 ORDER BY 1", db)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// DropSlot drops the slot name, ending the connection that streams from it if any (a
// stopped client's walsender may take a moment to exit). A slot that does not exist is
// not an error.
func DropSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	return dropSlots(ctx, conn, "slot_name = $1", name)
}

// DropSlots drops every replication slot of database db (DropSlot).
func DropSlots(ctx context.Context, conn *pgx.Conn, db string) error {
	return dropSlots(ctx, conn, "database = $1", db)
}

func dropSlots(ctx context.Context, conn *pgx.Conn, where, arg string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE "+where+" AND active_pid IS NOT NULL", arg)
		_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "+where+" AND active_pid IS NULL", arg)
		var left []string
		rows, err := conn.Query(ctx, "SELECT slot_name::text FROM pg_replication_slots WHERE "+where, arg)
		if err == nil {
			left, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("slots %v still there", left)
			}
			return fmt.Errorf("bench: drop replication slots (%s): %w", arg, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
