package capture

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Plugin is the logical decoding output plugin statecast reads.
const Plugin = "pgoutput"

// ErrSlotLost reports a slot that PostgreSQL invalidated (max_slot_wal_keep_size) or that
// disappeared: the changes since its position are gone and only a full re-read recovers.
var ErrSlotLost = errors.New("capture: replication slot lost")

// SlotInfo is a replication slot as pg_replication_slots shows it.
type SlotInfo struct {
	Name           string
	Plugin         string
	Type           string
	Database       string
	ActivePID      int32 // 0 when no connection streams from it
	WALStatus      string
	ConfirmedFlush LSN
	RestartLSN     LSN
}

// LookupSlot returns the slot named name, or nil when there is none.
func LookupSlot(ctx context.Context, q Querier, name string) (*SlotInfo, error) {
	s := &SlotInfo{Name: name}
	var plugin, db, walStatus, confirmed, restart *string
	var pid *int32
	err := q.QueryRow(ctx, `SELECT plugin, slot_type, database, active_pid, wal_status,
		confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, name).
		Scan(&plugin, &s.Type, &db, &pid, &walStatus, &confirmed, &restart)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("capture: slot %s: %w", name, err)
	}
	s.Plugin, s.Database, s.WALStatus = deref(plugin), deref(db), deref(walStatus)
	if pid != nil {
		s.ActivePID = *pid
	}
	if confirmed != nil {
		s.ConfirmedFlush, _ = pglsn(*confirmed)
	}
	if restart != nil {
		s.RestartLSN, _ = pglsn(*restart)
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Check validates that the slot can serve database: a logical slot of the pgoutput plugin
// on that database whose WAL is still there (ErrSlotLost otherwise).
func (s *SlotInfo) Check(database string) error {
	switch {
	case s.Type != "logical":
		return fmt.Errorf("capture: slot %s is a %s slot, not a logical one (drop it or configure another slot name)", s.Name, s.Type)
	case s.Plugin != Plugin:
		return fmt.Errorf("capture: slot %s uses plugin %s, not %s (drop it or configure another slot name)", s.Name, s.Plugin, Plugin)
	case s.Database != database:
		return fmt.Errorf("capture: slot %s belongs to database %s, not %s (configure another slot name)", s.Name, s.Database, database)
	case s.WALStatus == "lost" || s.RestartLSN == 0:
		return fmt.Errorf("%w: slot %s was invalidated (wal_status %q): the WAL it needed was removed", ErrSlotLost, s.Name, s.WALStatus)
	}
	return nil
}

// CreateSlot creates a logical pgoutput slot on a replication connection and returns its
// consistent point and exported snapshot. The snapshot stays importable (ImportSnapshot)
// until repl runs its next command.
func CreateSlot(ctx context.Context, repl *pgconn.PgConn, name string) (LSN, string, error) {
	if err := CheckSlotName(name); err != nil {
		return 0, "", err
	}
	// pglogrepl pastes the name into the command as it is: quoted here, as a name must be
	// wherever it meets SQL, although the rule above leaves nothing to escape.
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, pgx.Identifier{name}.Sanitize(), Plugin,
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return 0, "", fmt.Errorf("capture: create slot %s: %w", name, err)
	}
	at, err := pglsn(res.ConsistentPoint)
	if err != nil {
		return 0, "", err
	}
	return at, res.SnapshotName, nil
}

// DropSlot drops the slot if it exists.
func DropSlot(ctx context.Context, q Querier, name string) error {
	_, err := q.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name)
	if err != nil {
		return fmt.Errorf("capture: drop slot %s: %w", name, err)
	}
	return nil
}

// Terminate ends the server process streaming from the slot (a previous holder whose
// connection outlived it), so that a new stream can start.
func Terminate(ctx context.Context, q Querier, pid int32) error {
	_, err := q.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	return err
}

// SlotPositions are a slot's positions and the server's WAL end, read together.
type SlotPositions struct {
	End       LSN // pg_current_wal_lsn(): the server's WAL end
	Confirmed LSN // confirmed_flush_lsn: what the slot's consumer confirmed
	Restart   LSN // restart_lsn: the oldest WAL the slot makes the server keep
}

// Retained is how many bytes of WAL the slot makes the server keep.
func (p SlotPositions) Retained() int64 { return lsnDiff(p.End, p.Restart) }

// Behind is how many bytes of WAL the slot's consumer has not confirmed.
func (p SlotPositions) Behind() int64 { return lsnDiff(p.End, p.Confirmed) }

func lsnDiff(a, b LSN) int64 {
	if b == 0 || a <= b {
		return 0
	}
	return int64(a - b)
}

// ReadSlot reads the slot's positions and the server's WAL end (ErrSlotLost when the slot
// does not exist).
func ReadSlot(ctx context.Context, q Querier, name string) (SlotPositions, error) {
	var end, confirmed, restart string
	err := q.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, coalesce(confirmed_flush_lsn, '0/0')::text,
		coalesce(restart_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&end, &confirmed, &restart)
	if err == pgx.ErrNoRows {
		return SlotPositions{}, fmt.Errorf("%w: slot %s does not exist", ErrSlotLost, name)
	}
	if err != nil {
		return SlotPositions{}, fmt.Errorf("capture: slot %s positions: %w", name, err)
	}
	var p SlotPositions
	if p.End, err = pglsn(end); err == nil {
		if p.Confirmed, err = pglsn(confirmed); err == nil {
			p.Restart, err = pglsn(restart)
		}
	}
	return p, err
}
