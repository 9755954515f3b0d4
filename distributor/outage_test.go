package distributor

import (
	"context"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/record"
)

// Run-time outage tests: the real PostgreSQL behind a testenv.Proxy that is cut, and a
// dedicated real Kafka broker that is paused (kafka_outage_test.go).

const stockSQL = "SELECT id, name, version FROM stock"

func stockView() ViewConfig {
	return ViewConfig{Name: "stock", SQL: stockSQL, Key: []string{"id"},
		ViewSettings: ViewSettings{Incremental: "version", PollInterval: 50 * time.Millisecond, Overlap: OverlapVersions(3)}}
}

func (e *env) createStock() {
	e.exec(`CREATE SEQUENCE ver`)
	e.exec(`CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL, version bigint NOT NULL DEFAULT nextval('ver'))`)
	e.exec(`INSERT INTO stock (id, name) SELECT g, 'item ' || g FROM generate_series(1, 20) g`)
}

// startReg runs a Distributor with its own Prometheus registry (stopped at cleanup).
func startReg(t *testing.T, cfg Config, log *slog.Logger) (*running, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(cfg, WithLogger(log), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, finished: make(chan struct{})}
	go func() {
		r.err = d.Run(ctx)
		close(r.finished)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r, reg
}

// metricSum gathers reg and sums the samples of the named metric whose labels include match.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range match {
				if labelOf(m, k) != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// logTap keeps the messages of the distributor's log records (safe for concurrent use).
type logTap struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logTap) Enabled(context.Context, slog.Level) bool { return true }
func (l *logTap) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logTap) WithGroup(string) slog.Handler      { return l }

// count returns how many messages start with prefix.
func (l *logTap) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// values returns the durations of attribute attr in the messages starting with prefix.
func (l *logTap) values(prefix, attr string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, m := range l.msgs {
		if !strings.HasPrefix(m, prefix) {
			continue
		}
		for _, f := range strings.Fields(m) {
			if v, ok := strings.CutPrefix(f, attr+"="); ok {
				if d, err := time.ParseDuration(v); err == nil {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// rowKeysAfter returns, per key of view, how many row records (values and tombstones) the
// topic holds from offset from on.
func rowKeysAfter(recs []rec, view string, from int64) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		if r.offset >= from && r.meta.View == view && r.meta.Kind == record.KindRow {
			out[r.key]++
		}
	}
	return out
}

func topicEnd(recs []rec) int64 {
	if len(recs) == 0 {
		return 0
	}
	return recs[len(recs)-1].offset + 1
}

// TestPostgresOutage: the database connection (pool AND advisory-lock session) goes through
// a proxy that is cut for a few seconds while rows change. The code documents (doc.go, lock.go,
// docs/operations.md) that a lost lock session stops the stream and sends it back to standby,
// that it takes the lock again when it can, restores its state from the topic and runs a
// reconcile start-up epoch. Asserted: errors are counted; nothing at all is published while
// the database is unreachable (no row, no poll record: the watermark stays); after Restore
// every change made during the outage — insert, update AND delete — is published exactly once,
// rows that did not change are not republished, and the topic rebuilds the database's state.
func TestPostgresOutage(t *testing.T) {
	e := newEnv(t)
	e.createStock()
	proxy, dsn := testenv.PostgresProxy(t, e.dsn)
	cfg := e.config(stockView())
	cfg.Postgres.DSN = dsn
	tap := &logTap{}
	r, reg := startReg(t, cfg, slog.New(tap))
	r.waitReady(t)
	stream := map[string]string{"stream": e.topic}
	active := func() float64 { return metricSum(t, reg, "statecast_distributor_active", stream) }
	errs := func() float64 { return metricSum(t, reg, "statecast_distributor_errors_total", stream) }

	e.exec(`UPDATE stock SET name = 'before', version = nextval('ver') WHERE id = 1`)
	waitFor(t, e, "the update before the outage", func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "stock")["stock|1"], "before")
	})
	errs0 := errs()

	proxy.Cut()
	waitCond(t, "errors counted and the stream in standby after the cut", func() bool {
		return errs() >= errs0+2 && active() == 0
	})
	wm := metricSum(t, reg, "statecast_distributor_watermark_seconds", stream)
	cutEnd := topicEnd(readAll(t, e.brokers, e.topic))
	// changes while the database is unreachable for the distributor
	e.exec(`INSERT INTO stock (id, name) VALUES (21, 'during outage')`)
	e.exec(`UPDATE stock SET name = 'changed during outage', version = nextval('ver') WHERE id = 2`)
	e.exec(`DELETE FROM stock WHERE id = 3`)
	errsCut := errs()
	// The standby retries the lock every 2 s: wait until it failed again at least twice.
	waitCond(t, "retries during the outage", func() bool { return errs() >= errsCut+2 })
	if end := topicEnd(readAll(t, e.brokers, e.topic)); end != cutEnd {
		t.Fatalf("published during the database outage: topic end %d -> %d", cutEnd, end)
	}
	if got := metricSum(t, reg, "statecast_distributor_watermark_seconds", stream); got != wm {
		t.Fatalf("watermark moved during the outage: %v -> %v", wm, got)
	}
	if tap.count("stream stopped; back to standby") == 0 {
		t.Fatalf("no 'back to standby' log after the lock session was cut; log:\n%s", strings.Join(tap.msgs, "\n"))
	}

	for _, op := range []string{"poll", "snapshot", "lock"} {
		t.Logf("errors during the outage, op=%s: %v", op, metricSum(t, reg, "statecast_distributor_errors_total",
			map[string]string{"stream": e.topic, "op": op}))
	}
	// Polls that failed before the lock watchdog (500 ms) stopped the stream were retried
	// with a growing backoff. Usually 1-2 polls fail first; the watchdog may also win the
	// race, so their number is not asserted (TestPollRetry covers a long poll failure).
	waits := tap.values("poll failed; retrying", "retry_in")
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("poll retry delays do not grow: %v", waits)
		}
	}
	proxy.Restore()
	waitCond(t, "active again after restore", func() bool { return active() == 1 })
	want := e.dbRows("stock", stockSQL, "id")
	recs := waitFor(t, e, "every change of the outage", func(recs []rec) bool {
		return reflect.DeepEqual(canonMap(t, rowsOf(recs, "stock")), want)
	})
	// exactly the changed keys, once each (the start-up epoch after take-over is a reconcile)
	got := rowKeysAfter(recs, "stock", cutEnd)
	wantKeys := map[string]int{"stock|21": 1, "stock|2": 1, "stock|3": 1}
	if !maps.Equal(got, wantKeys) {
		t.Fatalf("row records after the outage: %v, want %v\n%s", got, wantKeys, dump(recs[cutEnd:]))
	}
	end := lastEnd(t, recs, "stock")
	if end == nil || end.Rows != int64(len(want)) || end.Tombstones != 1 {
		t.Fatalf("last epoch end %+v, want %d rows and 1 tombstone", end, len(want))
	}
	for _, rc := range recs[cutEnd:] {
		if rc.meta.View != "stock" || rc.meta.Kind != record.KindEpochBegin {
			continue
		}
		b, err := record.ParseEpochBegin(rc.value)
		if err != nil {
			t.Fatal(err)
		}
		if b.Mode != record.ModeReconcile {
			t.Fatalf("start-up epoch after the take-over is %q, want reconcile: %s", b.Mode, rc)
		}
	}
}
