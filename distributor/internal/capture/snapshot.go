package capture

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Snapshot is a REPEATABLE READ, READ ONLY transaction and what its snapshot shows of the
// WAL: which transaction ids it sees as committed, and the WAL insert position read right
// after it was taken (every transaction it shows committed before that position).
type Snapshot struct {
	Tx pgx.Tx
	// Insert is pg_current_wal_insert_lsn() read after the snapshot was taken.
	Insert LSN
	// Time is the transaction's now().
	Time time.Time

	xmin, xmax uint64
	xip        map[uint64]bool
	// exported: the slot's exported snapshot, taken at its consistent point: the slot
	// streams only transactions it does not show.
	exported bool
}

// Beginner starts transactions (a pgxpool.Pool, a pgx.Conn).
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// BeginSnapshot opens a snapshot transaction and reads its visibility and the WAL insert
// position in its first statement (which takes the snapshot).
func BeginSnapshot(ctx context.Context, db Beginner) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("capture: begin snapshot: %w", err)
	}
	s := &Snapshot{Tx: tx}
	var snap, insert string
	if err := tx.QueryRow(ctx, "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text, now()").Scan(&snap, &insert, &s.Time); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("capture: snapshot position: %w", err)
	}
	if s.Insert, err = pglsn(insert); err == nil {
		err = s.parse(snap)
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return s, nil
}

// ImportSnapshot opens a transaction in a slot's exported snapshot (the name returned by
// CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT), which is exactly the database at the
// slot's consistent point `at`.
func ImportSnapshot(ctx context.Context, db Beginner, name string, at LSN) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("capture: begin snapshot: %w", err)
	}
	s := &Snapshot{Tx: tx, Insert: at, exported: true}
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(name)); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("capture: import snapshot %s: %w", name, err)
	}
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&s.Time); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("capture: import snapshot %s: %w", name, err)
	}
	return s, nil
}

// parse reads pg_current_snapshot()'s text "xmin:xmax:xip,...".
func (s *Snapshot) parse(text string) error {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return fmt.Errorf("capture: snapshot %q", text)
	}
	var err error
	if s.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return fmt.Errorf("capture: snapshot %q: %w", text, err)
	}
	if s.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return fmt.Errorf("capture: snapshot %q: %w", text, err)
	}
	s.xip = map[uint64]bool{}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return fmt.Errorf("capture: snapshot %q: %w", text, err)
			}
			s.xip[v] = true
		}
	}
	return nil
}

// Visible reports whether the snapshot shows the committed transaction xid (a 32-bit id
// as pgoutput sends it, read relative to the snapshot's epoch).
func (s *Snapshot) Visible(xid uint32) bool {
	if s.exported {
		return false
	}
	full := uint64(int64(s.xmax) + int64(int32(xid-uint32(s.xmax))))
	return full < s.xmin || full < s.xmax && !s.xip[full]
}

// Split divides txns, received in commit order, into the prefix the snapshot shows and the
// rest. ok is false when the snapshot shows a transaction after one it does not show (a
// commit became visible before an earlier one, which PostgreSQL allows for an instant): no
// prefix matches it, and a new snapshot must be taken.
func (s *Snapshot) Split(txns []*Txn) (shown, rest []*Txn, ok bool) {
	i := 0
	for i < len(txns) && s.Visible(txns[i].Xid) {
		i++
	}
	for _, t := range txns[i:] {
		if s.Visible(t.Xid) {
			return nil, nil, false
		}
	}
	return txns[:i], txns[i:], true
}

// Close ends the transaction.
func (s *Snapshot) Close(ctx context.Context) {
	_ = s.Tx.Rollback(context.WithoutCancel(ctx))
}

func pglsn(s string) (LSN, error) {
	l, err := ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("capture: WAL position %q: %w", s, err)
	}
	return l, nil
}

// ParseLSN parses PostgreSQL's text form of a WAL position ("16/B374D848").
func ParseLSN(s string) (LSN, error) { return pglogrepl.ParseLSN(s) }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
