package distributor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/record"
)

// writer runs random transactions on the sportsbook schema until stopped: inserts,
// updates (prices, names, re-parenting) and deletes (cascading ones too) of markets,
// events and competitions, one to five statements per transaction.
type writer struct {
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	n     int
	err   error
	delay time.Duration
}

func startWriter(t *testing.T, dsn string, seed uint64, delay time.Duration) *writer {
	t.Helper()
	w := &writer{stop: make(chan struct{}), done: make(chan struct{}), delay: delay}
	conn, err := pgx.Connect(context.Background(), dsn+"&application_name=writer")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(w.delay):
			}
			if err := w.txn(conn, rng); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(func() { w.halt(t) })
	return w
}

func (w *writer) txn(conn *pgx.Conn, rng *rand.Rand) error {
	ctx := context.Background()
	stmts := []string{}
	for range 1 + rng.IntN(5) {
		c, e, m := 1+rng.IntN(4), 10+rng.IntN(30), 100+rng.IntN(200)
		switch rng.IntN(10) {
		case 0:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO competitions VALUES (%d, 'c%d') ON CONFLICT (id) DO UPDATE SET name = excluded.name || '*'", c, rng.IntN(100)))
		case 1:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO events SELECT %d, id, 'e%d' FROM competitions ORDER BY id LIMIT 1 ON CONFLICT (id) DO UPDATE SET status = CASE WHEN events.status = 'open' THEN 'closed' ELSE 'open' END", e, rng.IntN(100)))
		case 2, 3:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO markets SELECT %d, id, 'm', %d FROM events ORDER BY random() LIMIT 1 ON CONFLICT (id) DO UPDATE SET price = excluded.price", m, rng.IntN(1000)))
		case 4, 5:
			stmts = append(stmts, fmt.Sprintf("UPDATE markets SET price = %d WHERE id = %d", rng.IntN(1000), m))
		case 6:
			stmts = append(stmts, fmt.Sprintf("UPDATE markets SET event_id = (SELECT id FROM events ORDER BY random() LIMIT 1) WHERE id = %d", m))
		case 7:
			stmts = append(stmts, fmt.Sprintf("UPDATE competitions SET name = 'c%d' WHERE id = %d", rng.IntN(100), c))
		case 8:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM markets WHERE id = %d", m))
		case 9:
			if rng.IntN(4) == 0 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM events WHERE id = %d", e)) // cascades
			} else {
				stmts = append(stmts, fmt.Sprintf("UPDATE events SET name = 'e%d' WHERE id = %d", rng.IntN(100), e))
			}
		}
	}
	if _, err := conn.Exec(ctx, "BEGIN; "+strings.Join(stmts, "; ")+"; COMMIT"); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		if strings.Contains(err.Error(), "SQLSTATE 23") || strings.Contains(err.Error(), "SQLSTATE 40") {
			return nil // a constraint or a conflict with another writer: skip it
		}
		return err
	}
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	return nil
}

func (w *writer) halt(t *testing.T) int {
	t.Helper()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return w.n
}

// noDuplicates checks that no key is published twice in a row with the same value (what
// a restart must not do: republish what the topic already holds).
func noDuplicates(t *testing.T, recs []rec) {
	t.Helper()
	last := map[string]string{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.meta.Kind != record.KindRow {
			continue
		}
		v := "\x00tombstone"
		if r.value != nil {
			v = string(r.value)
		}
		if seen[r.key] && last[r.key] == v && r.value != nil {
			t.Fatalf("key %s published twice with the same value at offset %d", r.key, r.offset)
		}
		last[r.key], seen[r.key] = v, true
	}
}

// subprocess runs the distributor of the YAML config cfg as a separate process (this test
// binary with envHelperConfig), so that it can be killed with SIGKILL.
type subprocess struct{ cmd *exec.Cmd }

func startSubprocess(t *testing.T, yaml string) *subprocess {
	t.Helper()
	path := filepath.Join(t.TempDir(), "distributor.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelperConfig+"="+path)
	if os.Getenv("DIST_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &subprocess{cmd: cmd}
	t.Cleanup(p.kill)
	return p
}

func (p *subprocess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// walYAML is the YAML of the WAL test views' stream.
func (e *env) walYAML() string {
	return fmt.Sprintf(`
postgres: {dsn: "%s"}
kafka: {brokers: [%s]}
streams:
  - topic: %s
    position_interval: 20ms
    views:
      - {name: open_events, sql: "%s", key: [id]}
      - {name: event_markets, sql: "%s", key: [id]}
`, e.dsn, strings.Join(e.brokers, ", "), e.topic, openEventsSQL, strings.Join(strings.Fields(eventMarketsSQL), " "))
}

// TestWALKill: the distributor, a separate process, is killed with SIGKILL at random
// moments while a writer runs, and started again each time. Nothing is lost (every view
// converges to its SQL), nothing is published twice, the positions never go back.
func TestWALKill(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	dropSlotLater(t, slotName(e.topic))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := startWriter(t, e.dsn, seed, 5*time.Millisecond)
	for i := 0; i < 4; i++ {
		p := startSubprocess(t, e.walYAML())
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		p.kill()
	}
	n := w.halt(t)
	r := start(t, e.walConfig(walViews()...))
	r.waitReady(t)
	recs := e.waitConverged(t, "convergence after the kills", walViews()...)
	checkGroups(t, recs)
	noDuplicates(t, recs)
	t.Logf("%d transactions, %d records", n, len(recs))
}

// TestWALStandbyTakeover: two distributors of one wal stream; the active one is killed
// (SIGKILL) while a writer runs; the standby takes the lock and continues from the slot,
// without an epoch: the views' definitions are those of their first epochs.
func TestWALStandbyTakeover(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	w := startWriter(t, e.dsn, 7, 5*time.Millisecond)
	p := startSubprocess(t, e.walYAML())
	waitFor(t, e, "the subprocess's snapshot", func(recs []rec) bool { return countEnds(recs, "event_markets") >= 1 })
	r := start(t, e.walConfig(walViews()...)) // the standby
	time.Sleep(500 * time.Millisecond)
	if r.d.Active() {
		t.Fatal("the second distributor is active while the first holds the lock")
	}
	p.kill()
	r.waitReady(t)
	time.Sleep(500 * time.Millisecond)
	w.halt(t)
	recs := e.waitConverged(t, "convergence after the take-over", walViews()...)
	checkGroups(t, recs)
	noDuplicates(t, recs)
	for _, v := range walViews() {
		if n := countEnds(recs, v.Name); n != 1 {
			t.Errorf("%s: %d epochs, want the first one only (the standby continues from the slot):\n%s", v.Name, n, dump(recs))
		}
	}
}

// TestWALSlotDropped: the slot is dropped under the running stream; the distributor
// notices, counts it, creates a new slot and re-reads every view, and the changes made
// meanwhile arrive.
func TestWALSlotDropped(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	slot := slotName(e.topic)
	ctx := context.Background()
	for dropped := false; !dropped; {
		e.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		_, err := e.db.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
		dropped = err == nil
		e.exec("UPDATE markets SET price = price + 1 WHERE id = 100") // while the slot is gone
	}
	e.exec("DELETE FROM markets WHERE id = 200")
	e.waitConverged(t, "convergence after the new slot", views...)
	waitCond(t, "the lost slot counted", func() bool { return counterValue(r.d.m.slotLost.WithLabelValues(e.topic)) >= 1 })
	info, err := capture.LookupSlot(ctx, e.db, slot)
	if err != nil || info == nil {
		t.Fatalf("no slot after the recovery: %v", err)
	}
}

// TestWALTransientErrors: the database ends every connection of the distributor,
// repeatedly (as a restart does: SQLSTATE 57P01), while a writer runs; the process keeps
// running and converges.
func TestWALTransientErrors(t *testing.T) {
	e := newEnv(t)
	e.exec(sportsbookSchema)
	views := walViews()
	r := start(t, e.walConfig(views...))
	r.waitReady(t)
	w := startWriter(t, e.dsn, 11, 3*time.Millisecond)
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(200+100*i) * time.Millisecond)
		e.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'writer'`)
	}
	w.halt(t)
	recs := e.waitConverged(t, "convergence after the terminated sessions", views...)
	checkGroups(t, recs)
	select {
	case <-r.finished:
		t.Fatalf("Run ended: %v", r.err)
	default:
	}
}

func TestTransientPg(t *testing.T) {
	for code, want := range map[string]bool{
		"57P01": true, "57014": true, "40001": true, "40P01": true, "08006": true, "53300": true, "55P03": true, "XX000": true,
		"22012": false, "42P01": false, "42703": false, "23505": false, "": false,
	} {
		if got := transientPg(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("transientPg(%q) = %v, want %v", code, got, want)
		}
	}
}

// TestWALSlotInvalidated: with the distributor stopped, the database removes the WAL its
// slot still needs (max_slot_wal_keep_size) and invalidates the slot. At its next start
// the distributor detects it, counts it, creates a new slot and re-reads every view in a
// reconcile epoch: the changes made while it was down arrive, deletes included. Runs on a
// dedicated PostgreSQL (the setting is server-wide).
func TestWALSlotInvalidated(t *testing.T) {
	pg := testenv.DedicatedPostgres(t, "max_slot_wal_keep_size = 32MB", "max_wal_size = 64MB", "min_wal_size = 32MB")
	e := newEnvOn(t, pg.DSN)
	e.exec(sportsbookSchema)
	views := walViews()
	cfg := e.walConfig(views...)
	r := start(t, cfg)
	r.waitReady(t)
	e.waitConverged(t, "the first snapshot", views...)
	r.stop(t)

	e.exec("UPDATE markets SET price = 500 WHERE id = 100")
	e.exec("DELETE FROM markets WHERE id = 200")
	e.exec("CREATE TABLE filler (b text)")
	slot := slotName(e.topic)
	for i := 0; ; i++ {
		e.exec("INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 20000) g")
		e.exec("CHECKPOINT")
		info, err := capture.LookupSlot(context.Background(), e.db, slot)
		if err != nil || info == nil {
			t.Fatalf("slot %s: %+v %v", slot, info, err)
		}
		if info.WALStatus == "lost" {
			break
		}
		if i == 40 {
			t.Fatalf("slot not invalidated: %+v", info)
		}
	}
	r2 := start(t, cfg)
	r2.waitReady(t)
	recs := e.waitConverged(t, "convergence after the lost slot", views...)
	if counterValue(r2.d.m.slotLost.WithLabelValues(e.topic)) != 1 {
		t.Errorf("lost slots counted: %v, want 1", counterValue(r2.d.m.slotLost.WithLabelValues(e.topic)))
	}
	if end := lastEnd(t, recs, "event_markets"); end.Epoch != 2 || end.Tombstones != 1 {
		t.Errorf("the recovery epoch %+v: want epoch 2 with the delete's tombstone", end)
	}
}

// newEnvOn is newEnv on another PostgreSQL server (its admin DSN).
func newEnvOn(t *testing.T, admin string) *env {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.UniqueName("t")
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, brokers: testenv.KafkaBrokers(t), topic: testenv.UniqueName("dist"),
		dsn: fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)}
	if e.db, err = pgx.Connect(ctx, e.dsn); err != nil {
		t.Fatal(err)
	}
	deleteTopicLater(t, e.brokers, e.topic)
	t.Cleanup(func() { closeConn(e.db) })
	return e
}
