package capture

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Snapshot is a REPEATABLE READ, READ ONLY transaction and what its snapshot shows of the
// WAL: which transaction ids it sees as committed, and the WAL insert position read right
// after it was taken (every transaction it shows committed before that position).
type Snapshot struct {
	Tx pgx.Tx
	// Insert is pg_current_wal_insert_lsn() read after the snapshot was taken.
	Insert LSN
	// Flush is pg_current_wal_flush_lsn() read with Insert. The walsender sends only
	// flushed WAL; while Flush < Insert, the WAL up to Insert reaches the slot at the next
	// flush (see FlushWAL).
	Flush LSN
	// Time is the transaction's now().
	Time time.Time

	xmin, xmax uint64
	xip        map[uint64]bool
	// exported: the slot's exported snapshot, taken at its consistent point: the slot
	// streams only transactions it does not show.
	exported bool
	name     string // Export's name, once exported
}

// Beginner starts transactions (a pgxpool.Pool, a pgx.Conn).
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// BeginSnapshot opens a snapshot transaction and reads its visibility and the WAL insert
// position in its first statement (which takes the snapshot), which also sets settings
// for the transaction (as SetLocal does).
func BeginSnapshot(ctx context.Context, db Beginner, settings map[string]string) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("capture: begin snapshot: %w", err)
	}
	s := &Snapshot{Tx: tx}
	var snap, insert, flush string
	names, values := settingArrays(settings)
	if err := tx.QueryRow(ctx, "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn()::text, now(), "+
		"(SELECT count(set_config(n, v, true)) FROM unnest($1::text[], $2::text[]) AS _s(n, v))", names, values).Scan(&snap, &insert, &flush, &s.Time, nil); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("capture: snapshot position: %w", err)
	}
	if s.Insert, err = pglsn(insert); err == nil {
		if s.Flush, err = pglsn(flush); err == nil {
			err = s.parse(snap)
		}
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return s, nil
}

// ErrRewritten: a table was truncated (or otherwise rewritten) after a snapshot was
// taken; reads of it in that snapshot would find it empty.
var ErrRewritten = errors.New("capture: a table was rewritten (TRUNCATE) after the snapshot")

// LockTables takes ACCESS SHARE locks on tables (and their partitions) for the rest of
// tx, and fails with ErrRewritten, naming it, when one of them was rewritten since tx's
// snapshot was taken.
//
// TRUNCATE is not MVCC-safe: it gives the table a new, empty file, and a transaction whose
// snapshot is older than the TRUNCATE's commit but that reads the table after it sees the
// table empty — not as its snapshot had it. A cycle that read so would publish, at a
// position before the TRUNCATE, the table's rows as gone. A TRUNCATE needs an ACCESS
// EXCLUSIVE lock, which ACCESS SHARE blocks; so once the locks are held, the table's file
// cannot change until tx ends, and whether it changed before is told by its file in the
// snapshot's catalog (pg_class.relfilenode, read in the snapshot) against the current one
// (pg_relation_filenode, from the relation cache, up to date once the lock is taken). The
// same covers the other rewrites that are not MVCC-safe (ALTER TABLE … SET DATA TYPE,
// CLUSTER, VACUUM FULL), which take the same lock and give the table a new file.
//
// The locks are taken after the snapshot, not before: a cycle waits for the slot's WAL
// once it has its snapshot, and a lock held through that wait would hold a TRUNCATE, and
// behind it every other stream's cycle that reads the table — whose unread transactions
// may be what keeps the shared slot from sending the WAL the first one waits for.
func LockTables(ctx context.Context, tx pgx.Tx, tables []*Table) error {
	if len(tables) == 0 {
		return nil
	}
	names := make([]string, len(tables))
	oids := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.QualifiedName()
		oids[i] = strconv.FormatUint(uint64(t.OID), 10)
	}
	slices.Sort(names)
	// A table, and the partitions of a partitioned one (pg_partition_tree lists nothing
	// for a table outside a partition tree).
	in := "unnest('{" + strings.Join(oids, ",") + "}'::oid[]) AS t(oid)"
	sql := "LOCK TABLE " + strings.Join(names, ", ") + " IN ACCESS SHARE MODE; " +
		"SELECT c.oid::regclass::text FROM (SELECT t.oid FROM " + in + " UNION SELECT p.relid FROM " + in +
		" CROSS JOIN LATERAL pg_partition_tree(t.oid) AS p) AS r JOIN pg_class AS c ON c.oid = r.oid " +
		"WHERE c.relkind = 'r' AND c.relfilenode IS DISTINCT FROM pg_relation_filenode(c.oid)"
	results, err := tx.Conn().PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return fmt.Errorf("capture: lock the views' tables: %w", err)
	}
	var rewritten []string
	for _, r := range results {
		for _, row := range r.Rows {
			rewritten = append(rewritten, string(row[0]))
		}
	}
	if len(rewritten) > 0 {
		return fmt.Errorf("%w: %s", ErrRewritten, strings.Join(rewritten, ", "))
	}
	return nil
}

// SetLocal sets settings (name → value) for the rest of tx, as SET LOCAL does. An error
// names the setting PostgreSQL refused.
func SetLocal(ctx context.Context, tx pgx.Tx, settings map[string]string) error {
	for _, n := range slices.Sorted(maps.Keys(settings)) {
		if _, err := tx.Exec(ctx, "SELECT set_config($1, $2, true)", n, settings[n]); err != nil {
			return fmt.Errorf("setting %s = %q: %w", n, settings[n], err)
		}
	}
	return nil
}

func settingArrays(settings map[string]string) (names, values []string) {
	names, values = []string{}, []string{}
	for _, n := range slices.Sorted(maps.Keys(settings)) {
		names, values = append(names, n), append(values, settings[n])
	}
	return names, values
}

// Execer runs a statement (a pgxpool.Pool, a pgx.Conn).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// FlushWAL makes the server flush its WAL: a transaction that writes WAL (a transactional
// logical message, prefix statecast.flush, empty; pgoutput does not send messages unless
// asked) commits synchronously, and its commit flushes all the WAL before it. PostgreSQL's
// WAL writer flushes completed pages and asynchronous commits only, so WAL that no commit
// follows — page pruning done by readers, a non-transactional logical message — stays
// unflushed, and unsent to the slots, until the next commit or checkpoint; on a database
// that went quiet that may be many seconds. (A transaction that only takes an xid would
// not do: a commit that wrote no other WAL is not flushed synchronously.)
func FlushWAL(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, "BEGIN; SET LOCAL synchronous_commit = on; SELECT pg_logical_emit_message(true, 'statecast.flush', ''); COMMIT"); err != nil {
		return fmt.Errorf("capture: flush the WAL: %w", err)
	}
	return nil
}

// WALPositions returns the server's WAL insert position and how far its WAL is flushed:
// a slot is sent WAL up to the flushed position only.
func WALPositions(ctx context.Context, db Querier) (insert, flush LSN, err error) {
	var i, f string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn()::text").Scan(&i, &f); err != nil {
		return 0, 0, fmt.Errorf("capture: WAL positions: %w", err)
	}
	if insert, err = pglsn(i); err == nil {
		flush, err = pglsn(f)
	}
	return insert, flush, err
}

// ImportSnapshot opens a transaction in an exported snapshot: a slot's (the name returned
// by CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT), which is exactly the database at the
// slot's consistent point `at`, or one of Export's (at: the position its cycle reflects).
func ImportSnapshot(ctx context.Context, db Beginner, name string, at LSN) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("capture: begin snapshot: %w", err)
	}
	s := &Snapshot{Tx: tx, Insert: at, Flush: at, exported: true}
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

// Export exports the snapshot (pg_export_snapshot) for ImportSnapshot on other
// connections, while s stays open, once: it returns the same name again.
func (s *Snapshot) Export(ctx context.Context) (string, error) {
	if s.name != "" {
		return s.name, nil
	}
	if err := s.Tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&s.name); err != nil {
		return "", fmt.Errorf("capture: export snapshot: %w", err)
	}
	return s.name, nil
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
