package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Op is what a transaction of a Workload did.
type Op uint8

// The operations of a Workload's transactions.
const (
	OpInsert Op = iota
	OpUpdate
	OpDelete
	OpMixed // a multi-row transaction: inserts, updates and deletes
)

// Ops are the single-row operations, in the order a writer takes turns with them.
var Ops = []Op{OpInsert, OpUpdate, OpDelete}

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return "mixed"
}

// Absent is the version of a row that must not be there (a Probe's expectation of a
// delete).
const Absent int64 = -1

// WorkloadSchema is the table a Workload writes, named by its argument: the version v is
// what a cache shows of a row (it is unique per row change), pad makes rows of a realistic
// size.
func WorkloadSchema(table string) string {
	return "CREATE TABLE " + table + " (id bigint PRIMARY KEY, v bigint NOT NULL, w int NOT NULL, pad text NOT NULL)"
}

// WorkloadConfig configures a Workload.
type WorkloadConfig struct {
	DSN     string
	Table   string // created with WorkloadSchema
	Writers int    // connections, each writing its own rows
	// Live is how many rows each writer keeps in the table (Populate inserts them): every
	// transaction inserts as many rows as it deletes, the oldest ones.
	Live int
	// RowsPerTxn is the row changes per transaction: 1 takes turns with an insert, an
	// update and a delete (Ops); n > 1 inserts n/3 rows, deletes n/3 and updates the rest,
	// one of them the writer's marker row.
	RowsPerTxn int
	Pad        int // bytes of each row's pad column
}

// Txn is one transaction a Workload committed.
type Txn struct {
	Writer, Seq int
	// Xid is its transaction id as logical decoding reports it (the low 32 bits).
	Xid  uint32
	Op   Op
	Rows int // row changes
	// Key and Version are its probe row, the key text (the id) and the version it has
	// after the commit (Absent: deleted). A single-row transaction's probe row is its row;
	// a multi-row one's is its writer's marker row (id -1-writer), which each of the
	// writer's transactions updates and none deletes: a cache that shows the marker at
	// Version or later has applied the transaction, since a source transaction is applied
	// whole and a row's versions grow in commit order.
	Key     string
	Version int64
	Sent    time.Time // just before COMMIT was sent
	Done    time.Time // when COMMIT returned
	// LSN is pg_current_wal_insert_lsn() read on the same connection after COMMIT
	// (Hooks.ReadLSN); empty otherwise.
	LSN string

	// Visible is when a Probe saw every row it was told to expect of it.
	Visible time.Time
	expect  int // the Probe's expectations not met yet (under its lock)
}

// Hooks are called by each writer on its own goroutine, around the commit of a
// transaction.
type Hooks struct {
	// BeforeCommit sees the transaction (everything but Sent, Done and LSN set) after its
	// statements ran, before COMMIT: where a Probe is told what to expect.
	BeforeCommit func(*Txn)
	// AfterCommit sees it once committed (and its LSN read, with ReadLSN). It must not
	// block: the writer's next transaction waits for it.
	AfterCommit func(*Txn)
	// ReadLSN reads pg_current_wal_insert_lsn() after each COMMIT (one more round trip).
	ReadLSN bool
}

// Workload is a set of writer connections changing their own rows of one table: each
// commit timestamped, each transaction identified by its xid.
type Workload struct {
	cfg     WorkloadConfig
	writers []*writer
	version atomic.Int64 // the last version given to a row change
}

// writer is one connection and the rows it owns: ids k*Writers + index for k in [lo, hi),
// and its marker row. Updates go round the live rows (cursor); deletes take the oldest.
type writer struct {
	index          int
	conn           *pgx.Conn
	lo, hi, cursor int64
	seq            int
}

// NewWorkload checks cfg and connects the writers.
func NewWorkload(ctx context.Context, cfg WorkloadConfig) (*Workload, error) {
	if cfg.Writers < 1 || cfg.RowsPerTxn < 1 || cfg.Pad < 0 || cfg.Table == "" {
		return nil, fmt.Errorf("bench: workload: need a table, writers >= 1, rows per transaction >= 1 and pad >= 0 (got %+v)", cfg)
	}
	if int64(cfg.Live) < int64(cfg.RowsPerTxn)+2 {
		// A transaction updates and deletes distinct live rows.
		return nil, fmt.Errorf("bench: workload: %d live rows per writer, need at least rows per transaction + 2 = %d", cfg.Live, cfg.RowsPerTxn+2)
	}
	w := &Workload{cfg: cfg}
	for i := range cfg.Writers {
		conn, err := pgx.Connect(ctx, cfg.DSN)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("bench: workload: writer %d: %w", i, err)
		}
		w.writers = append(w.writers, &writer{index: i, conn: conn, hi: int64(cfg.Live)})
	}
	return w, nil
}

// Close closes the writers' connections.
func (w *Workload) Close() {
	for _, wr := range w.writers {
		_ = wr.conn.Close(context.Background())
	}
}

// id is the table id of a writer's k-th row.
func (w *Workload) id(wr *writer, k int64) int64 { return k*int64(w.cfg.Writers) + int64(wr.index) }

// marker is the id of a writer's marker row.
func marker(wr *writer) int64 { return -1 - int64(wr.index) }

// Populate inserts every writer's live rows and its marker row (version 0), in one
// statement.
func (w *Workload) Populate(ctx context.Context) error {
	n := w.cfg.Live * w.cfg.Writers
	_, err := w.writers[0].conn.Exec(ctx, "INSERT INTO "+w.cfg.Table+" (id, v, w, pad) SELECT i, 0, CASE WHEN i < 0 THEN -1 - i ELSE i % $2::int END, repeat('x', $3) FROM generate_series(-$2::int, $1::int - 1) AS i",
		n, w.cfg.Writers, w.cfg.Pad)
	if err != nil {
		return fmt.Errorf("bench: workload: populate: %w", err)
	}
	return nil
}

// Rows is the number of row changes in txns.
func Rows(txns []*Txn) int64 {
	var n int64
	for _, t := range txns {
		n += int64(t.Rows)
	}
	return n
}

// RunConfig says how long a Workload runs and how fast.
type RunConfig struct {
	// Rate is the row changes per second of all writers together, each pacing its own
	// share; 0 runs every writer as fast as it can. A writer that falls behind catches up
	// without sleeping, so a slow commit delays the next ones rather than dropping them.
	Rate float64
	// Duration and Txns end the run: the writers stop at the first transaction that would
	// start after Duration, or once Txns transactions were begun; 0 is no limit (at least
	// one must be set).
	Duration time.Duration
	Txns     int
	Hooks    Hooks
}

// Run runs the writers until rc's limits or ctx's end and returns the transactions they
// committed, each writer's in commit order. After an error of one writer the others stop
// and Run returns it.
func (w *Workload) Run(ctx context.Context, rc RunConfig) ([]*Txn, error) {
	if rc.Duration <= 0 && rc.Txns <= 0 {
		return nil, errors.New("bench: workload: a run needs a duration or a transaction count")
	}
	var interval time.Duration // between one writer's transactions
	if rc.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(w.cfg.RowsPerTxn*w.cfg.Writers) / rc.Rate)
	}
	out := make([][]*Txn, len(w.writers))
	err := PaceWriters(ctx, PaceConfig{Writers: len(w.writers), Interval: interval, Duration: rc.Duration, Calls: rc.Txns},
		func(ctx context.Context, i int) error {
			t, err := w.txn(ctx, w.writers[i], rc.Hooks)
			if err != nil {
				return err
			}
			out[i] = append(out[i], t)
			return nil
		})
	var all []*Txn
	for _, ts := range out {
		all = append(all, ts...)
	}
	return all, err
}

// txn runs one transaction of writer wr.
func (w *Workload) txn(ctx context.Context, wr *writer, h Hooks) (*Txn, error) {
	p := w.plan(wr)
	ins, upd, del := p.ins, p.upd, p.del
	t := &Txn{Writer: wr.index, Seq: wr.seq, Rows: len(ins) + len(upd) + len(del), Op: OpMixed}
	if w.cfg.RowsPerTxn == 1 {
		t.Op = Ops[wr.seq%len(Ops)]
	}
	var vs []int64
	for range len(ins) + len(upd) {
		vs = append(vs, w.version.Add(1))
	}
	// The probe row: the marker (the last update of a multi-row transaction), or the row.
	switch {
	case len(upd) > 0:
		t.Key, t.Version = strconv.FormatInt(upd[len(upd)-1], 10), vs[len(vs)-1]
	case len(ins) > 0:
		t.Key, t.Version = strconv.FormatInt(ins[len(ins)-1], 10), vs[len(ins)-1]
	default:
		t.Key, t.Version = strconv.FormatInt(del[len(del)-1], 10), Absent
	}

	tx, err := wr.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	var xid string
	b.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(r pgx.Row) error { return r.Scan(&xid) })
	if len(ins) > 0 {
		b.Queue("INSERT INTO "+w.cfg.Table+" (id, v, w, pad) SELECT i, v, $3, repeat('x', $4) FROM unnest($1::bigint[], $2::bigint[]) AS u(i, v)",
			ins, vs[:len(ins)], wr.index, w.cfg.Pad)
	}
	if len(upd) > 0 {
		b.Queue("UPDATE "+w.cfg.Table+" AS t SET v = u.v FROM unnest($1::bigint[], $2::bigint[]) AS u(i, v) WHERE t.id = u.i",
			upd, vs[len(ins):])
	}
	if len(del) > 0 {
		b.Queue("DELETE FROM "+w.cfg.Table+" WHERE id = ANY($1::bigint[])", del)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("bench: workload: writer %d: %w", wr.index, err)
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bench: workload: xid %q: %w", xid, err)
	}
	t.Xid = uint32(x)
	if h.BeforeCommit != nil {
		h.BeforeCommit(t)
	}
	t.Sent = time.Now()
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("bench: workload: writer %d: commit: %w", wr.index, err)
	}
	t.Done = time.Now()
	wr.committed(p)
	if h.ReadLSN {
		if err := wr.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&t.LSN); err != nil {
			return nil, fmt.Errorf("bench: workload: writer %d: WAL position: %w", wr.index, err)
		}
	}
	if h.AfterCommit != nil {
		h.AfterCommit(t)
	}
	return t, nil
}

// txnPlan is the row ids of a writer's next transaction and where its update cursor
// stands after it.
type txnPlan struct {
	ins, upd, del []int64
	cursor        int64
}

// plan chooses the ids of wr's next transaction: inserts after the newest row, deletes of
// the oldest, updates of the live rows after those, round the live range.
func (w *Workload) plan(wr *writer) txnPlan {
	ni, nu, nd := 0, 0, 0
	if n := w.cfg.RowsPerTxn; n == 1 {
		switch Ops[wr.seq%len(Ops)] {
		case OpInsert:
			ni = 1
		case OpUpdate:
			nu = 1
		default:
			nd = 1
		}
	} else {
		ni, nd = n/3, n/3
		nu = n - ni - nd
	}
	var p txnPlan
	for k := range int64(ni) {
		p.ins = append(p.ins, w.id(wr, wr.hi+k))
	}
	for k := range int64(nd) {
		p.del = append(p.del, w.id(wr, wr.lo+k))
	}
	first := wr.lo + int64(nd) // the oldest row that stays
	p.cursor = wr.cursor
	if w.cfg.RowsPerTxn > 1 {
		nu-- // the marker's
	}
	for range nu {
		if p.cursor < first || p.cursor >= wr.hi {
			p.cursor = first
		}
		p.upd = append(p.upd, w.id(wr, p.cursor))
		p.cursor++
	}
	if w.cfg.RowsPerTxn > 1 {
		p.upd = append(p.upd, marker(wr))
	}
	return p
}

// committed moves wr past a committed transaction.
func (wr *writer) committed(p txnPlan) {
	wr.lo += int64(len(p.del))
	wr.hi += int64(len(p.ins))
	wr.cursor = p.cursor
	wr.seq++
}

// tableRows reads the table as id → version.
func (w *Workload) tableRows(ctx context.Context) (map[int64]int64, error) {
	rows, err := w.writers[0].conn.Query(ctx, "SELECT id, v FROM "+w.cfg.Table)
	if err != nil {
		return nil, err
	}
	got := map[int64]int64{}
	var id, v int64
	_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error { got[id] = v; return nil })
	return got, err
}

// Check compares the table with what the writers believe it holds: each writer's live
// range of ids, nothing else.
func (w *Workload) Check(ctx context.Context) error {
	got, err := w.tableRows(ctx)
	if err != nil {
		return err
	}
	var problems []string
	want := 0
	for _, wr := range w.writers {
		want++
		if _, ok := got[marker(wr)]; !ok {
			problems = append(problems, fmt.Sprintf("writer %d: marker row %d missing", wr.index, marker(wr)))
		}
		for k := wr.lo; k < wr.hi; k++ {
			want++
			if _, ok := got[w.id(wr, k)]; !ok {
				problems = append(problems, fmt.Sprintf("writer %d: row %d missing", wr.index, w.id(wr, k)))
			}
		}
	}
	if len(got) != want {
		problems = append(problems, fmt.Sprintf("%d rows, want %d", len(got), want))
	}
	if len(problems) > 0 {
		return fmt.Errorf("bench: workload: table differs: %s", strings.Join(problems[:min(len(problems), 5)], "; "))
	}
	return nil
}
