package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/internal/testenv"
)

// stream is a test's slot, publication and running receiver.
type stream struct {
	recv  *Receiver
	sub   *Sub // of every table
	slot  string
	at    LSN
	snap  string
	sport uint32 // OID of sports
	comp  uint32 // OID of competitions
	pool  *pgxpool.Pool
	deps  *ViewDeps
}

// startStream creates a publication and a slot for sports and competitions, imports nothing
// yet (the exported snapshot stays importable until the receiver starts), and returns the
// stream with its receiver not yet running. Its changes carry the tables' identities, and
// sports' columns sportCols after its identity.
func startStream(ctx context.Context, t *testing.T, conn *pgx.Conn, dsn string, sportCols ...string) *stream {
	t.Helper()
	deps, err := analyze(ctx, t, conn, ViewSpec{Name: "v", SQL: "SELECT s.id, s.name, c.id AS cid FROM sports s LEFT JOIN competitions c ON c.sport_id = s.id", Key: []string{"id", "cid"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsurePublication(ctx, conn, "pub_test", deps.Tables, true); err != nil {
		t.Fatal(err)
	}
	s := &stream{slot: testenv.UniqueName("slot"), deps: deps}
	for _, tb := range deps.Tables {
		switch tb.Name {
		case "sports":
			s.sport = tb.OID
		case "competitions":
			s.comp = tb.OID
		}
	}
	repl, err := pgconn.Connect(ctx, dsn+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	if s.at, s.snap, err = CreateSlot(ctx, repl, s.slot); err != nil {
		t.Fatal(err)
	}
	admin := testenv.PostgresDSN(t)
	t.Cleanup(func() {
		repl.Close(context.Background())
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		for i := 0; i < 50; i++ { // the walsender may take a moment to release it
			if err := DropSlot(context.Background(), c, s.slot); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	ident := map[uint32]TableColumns{}
	for _, tb := range deps.Tables {
		tc := TableColumns{Identity: len(tb.Identity)}
		for _, c := range tb.Identity {
			tc.Names = append(tc.Names, c.Name)
		}
		if tb.Name == "sports" {
			tc.Names = append(tc.Names, sportCols...)
		}
		ident[tb.OID] = tc
	}
	s.recv = NewReceiver(repl, ReceiverConfig{Slot: s.slot, Publication: "pub_test", Start: s.at, Tables: ident})
	var oids []uint32
	for oid := range ident {
		oids = append(oids, oid)
	}
	s.sub = s.recv.Subscribe(oids)
	if s.pool, err = pgxpool.New(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pool.Close)
	return s
}

func (s *stream) run(ctx context.Context, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.recv.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("receiver: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// summary renders a transaction's changes as "sports I 7" lines (identity as int4).
func (s *stream) summary(txns []*Txn) string {
	var out []string
	name := func(oid uint32) string {
		if oid == s.sport {
			return "sports"
		}
		return "competitions"
	}
	id := func(i Identity) string {
		v := i.Values()
		if len(v) != 1 || len(v[0]) != 4 {
			return "?"
		}
		return fmt.Sprint(int32(binary.BigEndian.Uint32(v[0])))
	}
	for _, tx := range txns {
		var cs []string
		for _, c := range tx.Changes {
			e := name(c.Rel) + " " + string(c.Op)
			if c.Old != "" {
				e += " old=" + id(c.Old)
			}
			if c.New != "" {
				e += " new=" + id(c.New)
			}
			cs = append(cs, e)
		}
		for _, tr := range tx.Truncated {
			cs = append(cs, "truncate "+name(tr))
		}
		out = append(out, strings.Join(cs, ", "))
	}
	return strings.Join(out, "\n")
}

func TestReceiverChangesAndExportedSnapshot(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (1, 'Football'), (2, 'Tennis')")
	s := startStream(ctx, t, conn, dsn)
	// Committed after the slot's consistent point: streamed, not in the exported snapshot.
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (3, 'Golf')")
	exp, err := ImportSnapshot(ctx, s.pool, s.snap, s.at)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close(ctx)
	var n int
	if err := exp.Tx.QueryRow(ctx, "SELECT count(*) FROM sports").Scan(&n); err != nil || n != 2 {
		t.Fatalf("exported snapshot has %d sports (%v), want 2", n, err)
	}
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO competitions VALUES (10, 1, 'League')")
	mustExec(ctx, t, conn, "UPDATE sports SET name = 'Soccer' WHERE id = 1")
	mustExec(ctx, t, conn, "UPDATE sports SET id = 4 WHERE id = 2")
	mustExec(ctx, t, conn, "BEGIN; DELETE FROM competitions WHERE id = 10; DELETE FROM sports WHERE id = 3; COMMIT")
	mustExec(ctx, t, conn, "TRUNCATE competitions CASCADE")
	mustExec(ctx, t, conn, "CREATE TABLE other (id int primary key); INSERT INTO other VALUES (1)") // not published: no transaction

	snap, err := BeginSnapshot(ctx, s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	txns, through, err := s.sub.Take(ctx, snap.Insert)
	if err != nil {
		t.Fatal(err)
	}
	if through < snap.Insert {
		t.Fatalf("Take returned through %s < %s", through, snap.Insert)
	}
	want := strings.Join([]string{
		"sports I new=3",
		"competitions I new=10",
		"sports U new=1",
		"sports U old=2 new=4",
		"competitions D old=10, sports D old=3",
		"truncate competitions",
	}, "\n")
	if got := s.summary(txns); got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}
	for i := 1; i < len(txns); i++ {
		if txns[i].EndLSN <= txns[i-1].EndLSN || txns[i].CommitLSN >= txns[i].EndLSN {
			t.Fatalf("positions out of order: %+v then %+v", txns[i-1], txns[i])
		}
	}
	shown, rest, ok := snap.Split(txns)
	if !ok || len(shown) != len(txns) || len(rest) != 0 {
		t.Fatalf("Split = %d shown, %d rest, ok %v; want all shown", len(shown), len(rest), ok)
	}
	// The exported snapshot shows none of the streamed transactions.
	if shown, _, ok := exp.Split(txns); !ok || len(shown) != 0 {
		t.Fatalf("exported snapshot shows %d streamed transactions", len(shown))
	}
}

// TestReceiverSchemaChanges: a captured column renamed away reads as NULL and is listed in
// Missing (the change is not Unknown: only the views that map through it must re-read);
// renamed back, it reads again; a replica identity changed to other columns makes the
// table's changes Unknown and is reported by RelationChanged.
func TestReceiverSchemaChanges(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (1, 'Football')")
	s := startStream(ctx, t, conn, dsn, "name")
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (2, 'Tennis')")
	mustExec(ctx, t, conn, "ALTER TABLE sports RENAME COLUMN name TO title")
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (3, 'Golf')")
	mustExec(ctx, t, conn, "ALTER TABLE sports RENAME COLUMN title TO name")
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (4, 'Chess')")
	take := func() []Change {
		t.Helper()
		snap, err := BeginSnapshot(ctx, s.pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close(ctx)
		txns, _, err := s.sub.Take(ctx, snap.Insert)
		if err != nil {
			t.Fatal(err)
		}
		var out []Change
		for _, tx := range txns {
			out = append(out, tx.Changes...)
		}
		return out
	}
	cs := take()
	if len(cs) != 3 {
		t.Fatalf("%d changes, want 3: %+v", len(cs), cs)
	}
	for i, want := range []string{"Tennis", "", "Chess"} {
		c := cs[i]
		vals := c.New.Values()
		if c.Unknown || len(vals) != 2 || string(vals[1]) != want || (want == "") != (len(c.Missing) == 1 && c.Missing[0] == 1) {
			t.Errorf("change %d: unknown %v, missing %v, values %q; want name %q, missing only while renamed", i, c.Unknown, c.Missing, vals, want)
		}
	}
	if s.recv.RelationChanged() {
		t.Fatal("RelationChanged after renames")
	}
	mustExec(ctx, t, conn, "CREATE UNIQUE INDEX sports_name ON sports (name)")
	mustExec(ctx, t, conn, "ALTER TABLE sports REPLICA IDENTITY USING INDEX sports_name")
	mustExec(ctx, t, conn, "DELETE FROM sports WHERE id = 2")
	cs = take()
	if len(cs) != 1 || !cs[0].Unknown {
		t.Fatalf("the delete under another identity: %+v, want one Unknown change", cs)
	}
	if !s.recv.RelationChanged() {
		t.Fatal("RelationChanged is false after the replica identity changed")
	}
}

// TestReceiverOversizeValue: a captured value longer than MaxValueBytes is not copied:
// it reads as NULL and its change lists it in Oversize (table, column, index, length),
// old (REPLICA IDENTITY FULL sends it) or new; the other values read on. An oversize
// identity value makes the change Unknown.
func TestReceiverOversizeValue(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	mustExec(ctx, t, conn, "ALTER TABLE sports REPLICA IDENTITY FULL")
	take := func(s *stream) []Change {
		t.Helper()
		snap, err := BeginSnapshot(ctx, s.pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close(ctx)
		txns, _, err := s.sub.Take(ctx, snap.Insert)
		if err != nil {
			t.Fatal(err)
		}
		var out []Change
		for _, tx := range txns {
			out = append(out, tx.Changes...)
		}
		return out
	}
	s := startStream(ctx, t, conn, dsn, "name")
	s.recv.cfg.MaxValueBytes = 100
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (2, repeat('x', 5000))")
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (3, 'Golf')")
	mustExec(ctx, t, conn, "UPDATE sports SET name = repeat('y', 101) WHERE id = 3")
	mustExec(ctx, t, conn, "UPDATE sports SET name = repeat('z', 100) WHERE id = 2")
	cs := take(s)
	want := []struct {
		name     string
		oversize []OversizeValue
	}{
		{"", []OversizeValue{{Table: "public.sports", Column: "name", Index: 1, Bytes: 5000}}},
		{"Golf", nil},
		{"", []OversizeValue{{Table: "public.sports", Column: "name", Index: 1, Bytes: 101}}},
		{strings.Repeat("z", 100), []OversizeValue{{Table: "public.sports", Column: "name", Index: 1, Bytes: 5000}}}, // the old value
	}
	if len(cs) != len(want) {
		t.Fatalf("%d changes, want %d: %+v", len(cs), len(want), cs)
	}
	for i, w := range want {
		c := cs[i]
		vals := c.New.Values()
		if c.Unknown || len(vals) != 2 || string(vals[1]) != w.name || (w.name == "") != (vals[1] == nil) || fmt.Sprint(c.Oversize) != fmt.Sprint(w.oversize) {
			t.Errorf("change %d: unknown %v, oversize %+v, values %q; want name %q, oversize %+v", i, c.Unknown, c.Oversize, vals, w.name, w.oversize)
		}
	}

	// An identity of 4 bytes over a bound of 3.
	s2 := startStream(ctx, t, conn, dsn)
	s2.recv.cfg.MaxValueBytes = 3
	s2.run(ctx, t)
	mustExec(ctx, t, conn, "DELETE FROM sports WHERE id = 3")
	cs = take(s2)
	if len(cs) != 1 || !cs[0].Unknown || cs[0].Old != "" || len(cs[0].Oversize) != 1 || cs[0].Oversize[0].Column != "id" || cs[0].Oversize[0].Bytes != 4 {
		t.Fatalf("the delete of an oversize identity: %+v, want one Unknown change listing id's 4 bytes", cs)
	}
}

// A transaction that commits after a snapshot was taken is received but not shown: Split
// leaves it for the next snapshot, and a snapshot taken later shows it.
func TestSnapshotSplitsAtItsVisibility(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	s := startStream(ctx, t, conn, dsn)
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (1, 'a')")
	snap, err := BeginSnapshot(ctx, s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (2, 'b')")
	var after string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&after); err != nil {
		t.Fatal(err)
	}
	afterLSN, _ := ParseLSN(after)
	txns, _, err := s.sub.Take(ctx, afterLSN)
	if err != nil {
		t.Fatal(err)
	}
	shown, rest, ok := snap.Split(txns)
	if !ok || s.summary(shown) != "sports I new=1" || s.summary(rest) != "sports I new=2" {
		t.Fatalf("Split: ok %v shown %q rest %q", ok, s.summary(shown), s.summary(rest))
	}
	var n int
	if err := snap.Tx.QueryRow(ctx, "SELECT count(*) FROM sports").Scan(&n); err != nil || n != 1 {
		t.Fatalf("snapshot shows %d sports, want 1", n)
	}
	later, err := BeginSnapshot(ctx, s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close(ctx)
	if shown, rest, ok := later.Split(rest); !ok || len(shown) != 1 || len(rest) != 0 {
		t.Fatalf("later snapshot: shown %d rest %d ok %v", len(shown), len(rest), ok)
	}
	// A snapshot that shows a later transaction but not an earlier one has no prefix.
	if _, _, ok := later.Split([]*Txn{{Xid: later.sampleInvisible()}, shown[0]}); ok {
		t.Fatal("Split accepted a visible transaction after an invisible one")
	}
}

// sampleInvisible returns an xid the snapshot does not show (its xmax).
func (s *Snapshot) sampleInvisible() uint32 { return uint32(s.xmax) }

// Take waits for the server to decode up to the position asked for, pinging it: on an idle
// stream the keepalive position moves on its own only every wal_sender_timeout/2.
func TestTakeOnIdleStream(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	s := startStream(ctx, t, conn, dsn)
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO nokey VALUES (1, 'not published')") // WAL, no transaction for us
	var pos string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	want, _ := ParseLSN(pos)
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	txns, through, err := s.sub.Take(tctx, want)
	if err != nil || len(txns) != 0 || through < want {
		t.Fatalf("Take = %d txns, through %s (want >= %s), err %v", len(txns), through, want, err)
	}
	t.Logf("Take on an idle stream waited %s", time.Since(start))
	s.sub.Confirm(through)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := LookupSlot(ctx, conn, s.slot)
		if err != nil {
			t.Fatal(err)
		}
		if info.ConfirmedFlush >= through {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot confirmed %s, want >= %s", info.ConfirmedFlush, through)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustExec(ctx context.Context, t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestReceiverStreamed: with the server's logical_decoding_work_mem at its minimum, large
// transactions are streamed while they run (protocol 2); the receiver hands one over at
// its commit with every change but those of a subtransaction rolled back to its savepoint,
// drops one that aborted, and keeps the commit order with the transactions sent whole.
func TestReceiverStreamed(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	s := startStream(ctx, t, conn, dsn+"&logical_decoding_work_mem=64kB")
	s.run(ctx, t)
	mustExec(ctx, t, conn, `BEGIN;
		INSERT INTO sports SELECT i, 'sport ' || i FROM generate_series(1, 3000) i;
		SAVEPOINT a;
		INSERT INTO sports SELECT i, 'sport ' || i FROM generate_series(3001, 5000) i;
		ROLLBACK TO SAVEPOINT a;
		INSERT INTO sports SELECT i, 'sport ' || i FROM generate_series(6001, 6010) i;
		COMMIT`)
	mustExec(ctx, t, conn, `BEGIN; INSERT INTO sports SELECT i, 'gone ' || i FROM generate_series(7001, 10000) i; ROLLBACK`)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (20000, 'small')")

	snap, err := BeginSnapshot(ctx, s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	txns, _, err := s.sub.Take(ctx, snap.Insert)
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 2 {
		t.Fatalf("%d transactions, want the streamed one and the small one:\n%s", len(txns), s.summary(txns))
	}
	ids := map[string]int{}
	for _, c := range txns[0].Changes {
		ids[s.summary([]*Txn{{Changes: []Change{c}}})]++
	}
	if len(txns[0].Changes) != 3010 || ids["sports I new=1"] != 1 || ids["sports I new=6010"] != 1 || ids["sports I new=3001"] != 0 {
		t.Fatalf("streamed transaction: %d changes, want 3000 + 10 (the savepoint's rolled back)", len(txns[0].Changes))
	}
	if got := s.summary(txns[1:]); got != "sports I new=20000" {
		t.Fatalf("second transaction %q", got)
	}
	if txns[1].CommitLSN <= txns[0].EndLSN {
		t.Fatalf("positions out of order: %+v then %+v", txns[0], txns[1])
	}
	var streamed int64
	if err := conn.QueryRow(ctx, "SELECT coalesce((SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1), 0)", s.slot).Scan(&streamed); err != nil {
		t.Fatal(err)
	}
	if streamed < 1 {
		t.Fatal("the server streamed no transaction: the test did not exercise streaming")
	}
}

// TestReceiverStreamedOversize: in a transaction the server streams while it runs, the
// row changes (each with its xid after the message type) are parsed in place too: a value
// over MaxValueBytes is refused, the other values are read.
func TestReceiverStreamedOversize(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	s := startStream(ctx, t, conn, dsn+"&logical_decoding_work_mem=64kB", "name")
	s.recv.cfg.MaxValueBytes = 100
	s.run(ctx, t)
	mustExec(ctx, t, conn, `BEGIN;
		INSERT INTO sports SELECT i, 'sport ' || i FROM generate_series(1, 3000) i;
		INSERT INTO sports VALUES (5000, repeat('x', 5000));
		INSERT INTO sports VALUES (5001, 'last');
		COMMIT`)
	snap, err := BeginSnapshot(ctx, s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	txns, _, err := s.sub.Take(ctx, snap.Insert)
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 1 || len(txns[0].Changes) != 3002 {
		t.Fatalf("%d transactions, want one of 3002 changes:\n%s", len(txns), s.summary(txns))
	}
	cs := txns[0].Changes
	for i, c := range cs {
		vals := c.New.Values()
		if c.Unknown || len(vals) != 2 {
			t.Fatalf("change %d: unknown %v, values %q", i, c.Unknown, vals)
		}
		switch i {
		case 3000:
			if vals[1] != nil || fmt.Sprint(c.Oversize) != fmt.Sprint([]OversizeValue{{Table: "public.sports", Column: "name", Index: 1, Bytes: 5000}}) {
				t.Errorf("the huge value: %q, oversize %+v", vals[1], c.Oversize)
			}
		case 3001:
			if string(vals[1]) != "last" || c.Oversize != nil {
				t.Errorf("after the huge value: %q, oversize %+v", vals[1], c.Oversize)
			}
		case 0:
			if string(vals[1]) != "sport 1" || c.Oversize != nil {
				t.Errorf("first change: %q, oversize %+v", vals[1], c.Oversize)
			}
		}
	}
	var streamed int64
	if err := conn.QueryRow(ctx, "SELECT coalesce((SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1), 0)", s.slot).Scan(&streamed); err != nil {
		t.Fatal(err)
	}
	if streamed < 1 {
		t.Fatal("the server streamed no transaction: the test did not exercise streaming")
	}
}

// TestChangeSize: a Change is 88 B on a 64-bit platform — a transaction of a million
// rows holds a million of them until its cycle is published. Its fields are ordered so
// that nothing pads them: Rel, Op and Unknown share one word, then the two identities'
// string headers (16 B each) and the Missing and Oversize slice headers (24 B each).
// Oversize (the values refused over MaxValueBytes) made it 88 rather than 64 B, 24 MB
// more per million-row transaction; a padded order would be 96 B.
func TestChangeSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("not a 64-bit platform")
	}
	if n := unsafe.Sizeof(Change{}); n != 88 {
		t.Fatalf("capture.Change is %d B, want 88 (order its fields by size)", n)
	}
}
