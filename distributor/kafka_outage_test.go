package distributor

import (
	"context"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/internal/testenv"
)

// TestKafkaOutage: a DEDICATED real broker (never the shared one) is paused with SIGSTOP for
// 6 s while rows change — below the broker's own 9 s session timeout, so the broker does not
// fence itself — with kafka.timeout 2s, so requests to it time out and are retried. Asserted:
// produce retries (or failed polls) are counted; the watermark does not advance while the
// broker cannot acknowledge, although the database already holds newer versions; after
// SIGCONT every change is in the topic with its final value, rows that did not change are
// not republished, and the watermark reaches the newest version.
func TestKafkaOutage(t *testing.T) {
	k := testenv.DedicatedKafka(t)
	e := &env{t: t, brokers: k.Brokers, dsn: testenv.NewDatabase(t), topic: testenv.UniqueName("dist")}
	db, err := pgx.Connect(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { closeConn(db) })
	e.createStock()

	cfg := e.config(stockView())
	cfg.Kafka.Timeout = 2 * time.Second
	tap := &logTap{}
	r, reg := startReg(t, cfg, slog.New(tap))
	t.Cleanup(func() {
		if t.Failed() {
			tap.mu.Lock()
			t.Logf("distributor log:\n%s", strings.Join(tap.msgs, "\n"))
			tap.mu.Unlock()
		}
	})
	r.waitReady(t)
	stream := map[string]string{"stream": e.topic}
	watermark := func() float64 { return metricSum(t, reg, "statecast_distributor_watermark_seconds", stream) }
	trouble := func() float64 {
		return metricSum(t, reg, "statecast_distributor_produce_retries_total", stream) +
			metricSum(t, reg, "statecast_distributor_errors_total", stream)
	}
	maxVersion := func() float64 {
		var v int64
		if err := e.db.QueryRow(context.Background(), `SELECT max(version) FROM stock`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return float64(v)
	}

	e.exec(`UPDATE stock SET name = 'before', version = nextval('ver') WHERE id = 1`)
	waitCond(t, "the update before the pause acknowledged", func() bool { return watermark() == maxVersion() })
	pauseEnd := topicEnd(readAll(t, e.brokers, e.topic))
	wm0, trouble0 := watermark(), trouble()

	k.Pause(t)
	paused := true
	defer func() {
		if paused {
			k.Resume(t)
		}
	}()
	e.exec(`INSERT INTO stock (id, name) VALUES (21, 'during pause')`)
	e.exec(`UPDATE stock SET name = 'changed during pause', version = nextval('ver') WHERE id = 2`)
	pausedAt := time.Now()
	time.Sleep(3 * time.Second) // the change above is polled; its send waits for the broker
	if w := watermark(); w != wm0 {
		t.Fatalf("watermark advanced while the broker was paused: %v -> %v", wm0, w)
	}
	e.exec(`UPDATE stock SET name = 'changed twice during pause', version = nextval('ver') WHERE id = 2`)
	// keep it paused ~6 s in total (a fixed outage length, not a synchronisation)
	time.Sleep(time.Until(pausedAt.Add(6 * time.Second)))
	if w := watermark(); w != wm0 {
		t.Fatalf("watermark advanced while the broker was paused: %v -> %v", wm0, w)
	}
	k.Resume(t)
	paused = false
	// The produce request in flight timed out after kafka.timeout (2 s); sarama refreshes
	// metadata (which can only finish now) and retries it, or gives up and the poll fails.
	waitCond(t, "a produce retry or error counted for the pause", func() bool { return trouble() > trouble0 })

	want := e.dbRows("stock", stockSQL, "id")
	recs := waitFor(t, e, "every change of the pause", func(recs []rec) bool {
		return reflect.DeepEqual(canonMap(t, rowsOf(recs, "stock")), want)
	})
	waitCond(t, "the watermark at the newest version", func() bool { return watermark() == maxVersion() })
	got := rowKeysAfter(recs, "stock", pauseEnd)
	for key := range got {
		if key != "stock|21" && key != "stock|2" {
			t.Fatalf("unchanged row %s republished after the pause: %v\n%s", key, got, dump(recs[pauseEnd:]))
		}
	}
	polls := metricSum(t, reg, "statecast_distributor_errors_total", map[string]string{"stream": e.topic, "op": "poll"})
	retries := metricSum(t, reg, "statecast_distributor_produce_retries_total", stream)
	t.Logf("during the pause: %v produce retries, %v failed polls; row records after it: %v", retries, polls, got)
	// A change is published once, or — only after a send that failed (at-least-once: the
	// poll is re-read and re-sent because its state did not advance) — again with the same
	// or a newer value; never is one lost (checked above).
	if polls == 0 {
		wantOnce := map[string]int{"stock|21": 1, "stock|2": got["stock|2"]}
		if !maps.Equal(got, wantOnce) || got["stock|2"] > 2 {
			t.Fatalf("without a failed send, row records after the pause %v", got)
		}
	}
	if n := tap.count("poll failed; retrying"); n != int(polls) {
		t.Errorf("%d failed polls logged, %v counted", n, polls)
	}
}
