package distributor

import (
	"context"
	"strings"
	"testing"
	"time"
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
	e.exec(`SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`)
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
	_ = strings.Contains
}
