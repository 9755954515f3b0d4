package distributor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// TestStandbyTakeover: a second distributor of the same stream waits as standby; it takes
// over when the active one loses its database session (killed) and when it is stopped.
func TestStandbyTakeover(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	cfg := e.config(itemsView())
	r1 := start(t, cfg)
	r1.waitReady(t)
	r2 := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// r2 is a standby: it refuses to reconcile (once its streams are set up)
	for {
		err := r2.d.Reconcile(ctx, "items")
		if isErr(err, ErrNotActive) {
			break
		}
		if err == nil {
			t.Fatal("standby reconciled")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// kill the active distributor's database session: it must stop publishing and r2 take over
	e.killLockHolder()
	r2.waitReady(t)
	e.exec(`INSERT INTO items (id, name) VALUES (20, 'after takeover')`)
	recs := waitFor(t, e, "row 20", func(recs []rec) bool { return rowsOf(recs, "items")["items|20"] != "" })
	end := lastEnd(t, recs, "items")
	if end.Epoch != 2 || end.Published != 0 || end.Rows != 3 {
		t.Errorf("take-over epoch-end %+v (want epoch 2, nothing republished)", end)
	}

	// stop r2: r1 (back in standby after losing its lock) takes over again
	r2.stop(t)
	e.exec(`INSERT INTO items (id, name) VALUES (21, 'second takeover')`)
	recs = waitFor(t, e, "row 21 and epoch 3", func(recs []rec) bool {
		return rowsOf(recs, "items")["items|21"] != "" && countEnds(recs, "items") == 3
	})
	if end := lastEnd(t, recs, "items"); end.Epoch != 3 || end.Rows < 4 {
		t.Errorf("second take-over epoch-end %+v", end)
	}
	if !r1.d.Active() {
		t.Error("r1 not active after take-over")
	}
	// every epoch-begin is followed by its epoch-end before the next begin
	open := false
	for _, k := range kinds(recs, "items") {
		switch {
		case k == "epoch-begin" && open, k == "epoch-end" && !open:
			t.Fatalf("epochs interleaved: %v", kinds(recs, "items"))
		case k == "epoch-begin":
			open = true
		case k == "epoch-end":
			open = false
		}
	}
}

// TestStandbyTakeoverKill: the active distributor is a separate process killed with
// SIGKILL; the standby takes over and publishes what changed, without republishing.
func TestStandbyTakeoverKill(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	path := filepath.Join(t.TempDir(), "distributor.yaml")
	yaml := fmt.Sprintf(`
postgres: {dsn: "%s"}
kafka: {brokers: [%s]}
streams:
  - topic: %s
    capture: poll
    views:
      - {name: items, sql: "%s", key: [id], incremental: updated_at, poll_interval: 50ms, overlap: 10s}
`, e.dsn, strings.Join(e.brokers, ", "), e.topic, itemsSQL)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelperConfig+"="+path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor(t, e, "the subprocess's snapshot", func(recs []rec) bool { return countEnds(recs, "items") == 1 })

	r2 := start(t, e.config(itemsView()))
	e.exec(`INSERT INTO items (id, name) VALUES (50, 'by the subprocess')`)
	waitFor(t, e, "row 50", func(recs []rec) bool { return rowsOf(recs, "items")["items|50"] != "" })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	r2.waitReady(t)
	e.exec(`INSERT INTO items (id, name) VALUES (51, 'by the standby')`)
	recs := waitFor(t, e, "row 51", func(recs []rec) bool { return rowsOf(recs, "items")["items|51"] != "" })
	end := lastEnd(t, recs, "items")
	if end.Epoch != 2 || end.Published != 0 || end.Rows != 4 {
		t.Errorf("take-over epoch-end %+v (want epoch 2, 4 rows, nothing republished)", end)
	}
}

// killLockHolder terminates the database session that holds this test's stream lock, and
// only that one: pg_locks lists the advisory locks of EVERY database of the shared server
// (other tests' distributors, a `cachectl dev` demo), so the query filters on this
// database and on the stream's lock key (a bigint key is classid = high 32 bits,
// objid = low 32 bits, objsubid = 1).
func (e *env) killLockHolder() {
	e.t.Helper()
	k := uint64(lockKey(e.topic))
	e.exec(`SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1`,
		int64(k>>32), int64(k&0xffffffff))
}

// TestKillLockHolderSparesOthers: the take-over tests' kill must not touch advisory locks
// of other databases on the shared server, nor other locks of the same database. Before
// this helper, TestStandbyTakeover terminated every advisory-lock holder of the server,
// which made any distributor running at the same time (a parallel test, `cachectl dev`)
// lose its lock and rerun its start-up epochs (a reconcile of all views with one LSN).
func TestKillLockHolderSparesOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := testenv.NewDatabase(t) // another "distributor" on the same server
	bystander, err := acquireLock(ctx, other, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	defer bystander.Close()
	sameDB, err := acquireLock(ctx, e.dsn, e.topic+"-other")
	if err != nil {
		t.Fatal(err)
	}
	defer sameDB.Close()
	mine, err := acquireLock(ctx, e.dsn, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()

	e.killLockHolder()
	waitCond(t, "the stream lock's session to end", func() bool { return mine.conn.Ping(ctx) != nil })
	if err := bystander.conn.Ping(ctx); err != nil {
		t.Errorf("lock holder of another database was killed: %v", err)
	}
	if err := sameDB.conn.Ping(ctx); err != nil {
		t.Errorf("holder of another stream's lock was killed: %v", err)
	}
}
