package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/pggate"
	"github.com/statecast/statecast/internal/testenv"
)

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestWorkload runs the writers against the real PostgreSQL: every transaction committed,
// its commit times and xid in order on its connection, the table as the writers believe.
func TestWorkload(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, ctx, dsn)
	for _, tb := range []string{"single", "multi"} {
		if _, err := conn.Exec(ctx, WorkloadSchema(tb)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("single-row", func(t *testing.T) {
		wl, err := NewWorkload(ctx, WorkloadConfig{DSN: dsn, Table: "single", Writers: 3, Live: 10, RowsPerTxn: 1, Pad: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer wl.Close()
		if err := wl.Populate(ctx); err != nil {
			t.Fatal(err)
		}
		var before, after atomic.Int64
		txns, err := wl.Run(ctx, RunConfig{Txns: 90, Hooks: Hooks{ReadLSN: true,
			BeforeCommit: func(t *Txn) { before.Add(1) },
			AfterCommit: func(tx *Txn) {
				after.Add(1)
				if tx.Done.IsZero() || tx.LSN == "" {
					t.Errorf("AfterCommit before the commit was done: %+v", tx)
				}
			}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(txns) != 90 || before.Load() != 90 || after.Load() != 90 || Rows(txns) != 90 {
			t.Fatalf("%d transactions, %d rows, hooks %d and %d; want 90", len(txns), Rows(txns), before.Load(), after.Load())
		}
		checkOrder(t, txns)
		for _, tx := range txns {
			if tx.Op != Ops[tx.Seq%3] || tx.Rows != 1 || (tx.Op == OpDelete) != (tx.Version == Absent) {
				t.Errorf("transaction %d of writer %d: %v, %d rows, version %d", tx.Seq, tx.Writer, tx.Op, tx.Rows, tx.Version)
			}
		}
		if err := wl.Check(ctx); err != nil {
			t.Fatal(err)
		}
		checkProbeRows(t, ctx, conn, "single", txns)
	})

	t.Run("multi-row", func(t *testing.T) {
		wl, err := NewWorkload(ctx, WorkloadConfig{DSN: dsn, Table: "multi", Writers: 2, Live: 20, RowsPerTxn: 7, Pad: 0})
		if err != nil {
			t.Fatal(err)
		}
		defer wl.Close()
		if err := wl.Populate(ctx); err != nil {
			t.Fatal(err)
		}
		txns, err := wl.Run(ctx, RunConfig{Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(txns) == 0 {
			t.Fatal("no transaction in 300ms")
		}
		checkOrder(t, txns)
		for _, tx := range txns {
			if tx.Op != OpMixed || tx.Rows != 7 || tx.Key != strconv.Itoa(-1-tx.Writer) || tx.Version <= 0 {
				t.Errorf("transaction %d of writer %d: %v, %d rows, probe %s at %d", tx.Seq, tx.Writer, tx.Op, tx.Rows, tx.Key, tx.Version)
			}
		}
		if err := wl.Check(ctx); err != nil {
			t.Fatal(err)
		}
		checkProbeRows(t, ctx, conn, "multi", txns)
	})

	if _, err := NewWorkload(ctx, WorkloadConfig{DSN: dsn, Table: "multi", Writers: 1, Live: 5, RowsPerTxn: 4}); err == nil {
		t.Error("a workload with fewer live rows than a transaction changes was accepted")
	}
	wl, err := NewWorkload(ctx, WorkloadConfig{DSN: dsn, Table: "multi", Writers: 1, Live: 10, RowsPerTxn: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	if _, err := wl.Run(ctx, RunConfig{}); err == nil {
		t.Error("a run without a limit was accepted")
	}
}

// checkOrder checks each writer's transactions: in sequence, COMMIT sent before it
// returned and after the previous one returned, xids and WAL positions growing.
func checkOrder(t *testing.T, txns []*Txn) {
	t.Helper()
	last := map[int]*Txn{}
	for _, tx := range txns {
		if !tx.Sent.Before(tx.Done) {
			t.Errorf("writer %d transaction %d: COMMIT sent at %v, returned at %v", tx.Writer, tx.Seq, tx.Sent, tx.Done)
		}
		if p := last[tx.Writer]; p != nil {
			if tx.Seq != p.Seq+1 || tx.Sent.Before(p.Done) || tx.Xid <= p.Xid {
				t.Errorf("writer %d: transaction %d (xid %d, sent %v) after %d (xid %d, returned %v)",
					tx.Writer, tx.Seq, tx.Xid, tx.Sent, p.Seq, p.Xid, p.Done)
			}
			if tx.LSN != "" {
				a, _ := cacheclient.ParseLSN(p.LSN)
				b, err := cacheclient.ParseLSN(tx.LSN)
				if err != nil || b <= a {
					t.Errorf("writer %d: WAL position %s after %s (%v)", tx.Writer, tx.LSN, p.LSN, err)
				}
			}
		} else if tx.Seq != 0 {
			t.Errorf("writer %d starts at transaction %d", tx.Writer, tx.Seq)
		}
		last[tx.Writer] = tx
	}
}

// checkProbeRows checks the last transaction's probe row of each writer in the table: at
// its version, or gone for a delete.
func checkProbeRows(t *testing.T, ctx context.Context, conn *pgx.Conn, table string, txns []*Txn) {
	t.Helper()
	last := map[int]*Txn{}
	for _, tx := range txns {
		last[tx.Writer] = tx
	}
	for _, tx := range last {
		var v int64
		err := conn.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = $1", tx.Key).Scan(&v)
		switch {
		case tx.Version == Absent && err != pgx.ErrNoRows:
			t.Errorf("writer %d: deleted row %s: %d, %v", tx.Writer, tx.Key, v, err)
		case tx.Version != Absent && (err != nil || v != tx.Version):
			t.Errorf("writer %d: row %s at %d (%v), want %d", tx.Writer, tx.Key, v, err, tx.Version)
		}
	}
}

// recvLogicalBin returns the pg_recvlogical the floor runs, skipping (failing under CI)
// when there is none.
func recvLogicalBin(t *testing.T) string {
	if _, err := os.Stat(DefaultRecvLogical); err == nil {
		return DefaultRecvLogical
	}
	if p, err := exec.LookPath("pg_recvlogical"); err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatal("pg_recvlogical not found")
	}
	t.Skip("pg_recvlogical not found (install postgresql-15)")
	return ""
}

// TestRecvLogical runs pg_recvlogical on a slot of the real PostgreSQL and reads back a
// known insert, update and delete, each transaction by its xid.
func TestRecvLogical(t *testing.T) {
	bin := recvLogicalBin(t)
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, ctx, dsn)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY, note text, n int)"); err != nil {
		t.Fatal(err)
	}
	if err := Publication(ctx, conn, "p", "t"); err != nil {
		t.Fatal(err)
	}
	slot := UniqueName("bench_test")
	if _, err := CreateSlot(ctx, conn, slot, "pgoutput"); err != nil {
		t.Fatal(err)
	}
	rl, err := StartRecvLogical(RecvLogicalConfig{Bin: bin, DSN: dsn, Slot: slot, Publication: "p", KeepChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	var xids []uint32
	var sent []time.Time
	for _, q := range []string{
		"INSERT INTO t VALUES (1, E'line one\\nline two', NULL)",
		"UPDATE t SET n = 7 WHERE id = 1",
		"DELETE FROM t WHERE id = 1",
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var xid uint64
		if err := tx.QueryRow(ctx, q+" RETURNING pg_current_xact_id()::text::bigint").Scan(&xid); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, time.Now())
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		xids = append(xids, uint32(xid))
	}
	if err := rl.WaitXids(ctx, xids, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	id := binary.BigEndian.AppendUint64(nil, 1)
	want := []struct {
		op     Op
		values [][]byte
	}{
		{OpInsert, [][]byte{id, []byte("line one\nline two"), nil}},
		{OpUpdate, [][]byte{id, []byte("line one\nline two"), {0, 0, 0, 7}}},
		{OpDelete, [][]byte{id, nil, nil}},
	}
	var lsn pglogrepl.LSN
	for i, x := range xids {
		lt, ok := rl.Txn(x)
		if !ok || lt.Rows != 1 || len(lt.Changes) != 1 || lt.CommitLSN <= lsn || lt.Received.Before(sent[i]) {
			t.Fatalf("transaction %d (xid %d): %+v, %v", i, x, lt, ok)
		}
		lsn = lt.CommitLSN
		c := lt.Changes[0]
		if c.Op != want[i].op || c.Table != "public.t" || strings.Join(c.Columns, ",") != "id,note,n" || len(c.Values) != 3 {
			t.Fatalf("transaction %d: %+v", i, c)
		}
		for j, v := range want[i].values {
			if !bytes.Equal(c.Values[j], v) || (v == nil) != (c.Values[j] == nil) {
				t.Errorf("transaction %d (%v), column %s: %q, want %q", i, c.Op, c.Columns[j], c.Values[j], v)
			}
		}
	}
	// Streaming may start after the first commits: the slot keeps them.
	if first, _ := rl.Txn(xids[0]); rl.Streaming().After(first.Received) {
		t.Errorf("streaming since %v, the first commit received at %v", rl.Streaming(), first.Received)
	}
	if rl.Rows() != 3 {
		t.Errorf("%d rows received, want 3", rl.Rows())
	}
	if err := rl.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := DropSlot(ctx, conn, slot); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("slot still there: %d, %v", n, err)
	}
}

// TestGate holds a replication connection through the gate while an ordinary connection
// through it keeps working, then releases it.
func TestGate(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, gdsn, err := pggate.Start(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if gdsn == dsn {
		t.Fatalf("the gate's DSN is the server's: %s", gdsn)
	}
	plain := connect(t, ctx, gdsn)
	cfg, err := pgconn.ParseConfig(gdsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())
	if _, err := pglogrepl.IdentifySystem(ctx, repl); err != nil {
		t.Fatal(err)
	}

	g.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := pglogrepl.IdentifySystem(ctx, repl)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("IDENTIFY_SYSTEM answered while held (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	var one int
	if err := plain.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("an ordinary connection while held: %d, %v", one, err)
	}
	g.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("IDENTIFY_SYSTEM not answered after the release")
	}
}

// TestPipelineCache runs the WAL capture path (distributor, player, cacheclient) with the
// writers and the probe: every transaction becomes visible after its commit, the cache
// ends equal to the table, and closing the pipeline drops its slot.
func TestPipelineCache(t *testing.T) {
	testenv.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := newArgs("test", []string{"-brokers", strings.Join(testenv.KafkaBrokers(t), ",")}, io.Discard)
	env, err := NewDistEnv(ctx, args, WorkloadSchema("rows"))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	wl, err := NewWorkload(ctx, WorkloadConfig{DSN: env.DSN, Table: "rows", Writers: 2, Live: 20, RowsPerTxn: 1, Pad: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	if err := wl.Populate(ctx); err != nil {
		t.Fatal(err)
	}
	pipe, err := StartPipeline(ctx, env, env.DSN, []distributor.ViewConfig{{Name: "rows", SQL: "SELECT id, v FROM rows", Key: []string{"id"}}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = pipe.Close()
		}
	}()
	if pipe.Slot() == "" || len(pipe.Dependencies()) == 0 {
		t.Fatalf("slot %q, dependencies %q", pipe.Slot(), pipe.Dependencies())
	}
	cache, err := StartCache(ctx, pipe.Player.Addr(), pipe.Topic, map[string]cacheclient.Decoder[int64]{"rows": VersionDecoder})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	probe := cache.Probe("rows")
	txns, err := wl.Run(ctx, RunConfig{Txns: 30, Hooks: Hooks{BeforeCommit: func(t *Txn) { probe.Expect(t, t.Key, t.Version) }}})
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Wait(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tx := range txns {
		if tx.Visible.Before(tx.Sent) {
			t.Errorf("transaction %d of writer %d visible at %v, before its COMMIT at %v", tx.Seq, tx.Writer, tx.Visible, tx.Sent)
		}
	}
	rows, err := wl.tableRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	view := cache.View("rows")
	if view.Len() != len(rows) {
		t.Errorf("the cache holds %d rows, the table %d", view.Len(), len(rows))
	}
	for id, v := range rows {
		if got, ok := view.Get(strconv.FormatInt(id, 10)); !ok || got != v {
			t.Errorf("row %d: the cache shows %d (%v), the table %d", id, got, ok, v)
		}
	}
	closed = true
	if err := pipe.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := Slots(ctx, env.Conn, env.DB()); err != nil || len(left) != 0 {
		t.Fatalf("slots left after Close: %v, %v", left, err)
	}
}
