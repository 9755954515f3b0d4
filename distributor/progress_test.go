package distributor

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/statecast/statecast/internal/testenv"
)

// logBuffer holds a distributor's JSON log.
type logBuffer struct{ testenv.LockedBuffer }

// lines are the JSON log lines whose msg is msg.
func (l *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil || m["msg"] != msg {
			continue
		}
		out = append(out, m)
	}
	return out
}

// TestProgress: a snapshot that outlasts progress_interval logs its rows, rate, view and
// phase while it runs; the restore from the topic at the next start does the same; the
// rows and records read and the epoch's duration are metrics.
func TestProgress(t *testing.T) {
	e := newEnv(t)
	const n = 200000
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, name text)`)
	e.exec(`INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, $1) g`, n)
	e.exec(`ANALYZE big`)
	cfg := e.config(ViewConfig{Name: "big", SQL: "SELECT id, name FROM big", Key: []string{"id"}})
	cfg.ProgressInterval = 20 * time.Millisecond
	run := func() (*logBuffer, *prometheus.Registry) {
		var logs logBuffer
		reg := prometheus.NewRegistry()
		d, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		r := &running{d: d, finished: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { r.err = d.Run(ctx); close(r.finished) }()
		r.waitReady(t)
		r.stop(t)
		return &logs, reg
	}

	logs, reg := run()
	lines := logs.lines(t, "progress")
	var snap map[string]any
	for _, l := range lines {
		if l["phase"] == "snapshot" && l["view"] == "big" {
			snap = l
		}
	}
	if snap == nil {
		t.Fatalf("no progress line of the snapshot: %v", lines)
	}
	if rows, _ := snap["rows"].(float64); rows <= 0 || rows > n {
		t.Errorf("progress rows %v", snap["rows"])
	}
	if _, ok := snap["rows_per_s"].(float64); !ok || snap["estimate"] == nil || snap["stream"] != e.topic {
		t.Errorf("progress line %v: want rows_per_s, estimate, stream", snap)
	}
	if got := readTotal(t, reg, "statecast_distributor_read_total", e.topic, "big", "snapshot"); got != n {
		t.Errorf("read_total{phase=snapshot} = %v, want %d", got, n)
	}
	if c, err := testutil.GatherAndCount(reg, "statecast_distributor_epoch_duration_seconds"); err != nil || c != 1 {
		t.Errorf("epoch_duration_seconds: %d series, %v", c, err)
	}

	// The next start restores its state from the topic: n records and the controls.
	logs, reg = run()
	restored := false
	for _, l := range logs.lines(t, "progress") {
		restored = restored || l["phase"] == "restore"
	}
	if !restored {
		t.Errorf("no progress line of the restore")
	}
	if got := readTotal(t, reg, "statecast_distributor_read_total", e.topic, "", "restore"); got < n {
		t.Errorf("read_total{phase=restore} = %v, want at least %d", got, n)
	}
}

// readTotal is the value of the counter name{stream,view,phase} in reg.
func readTotal(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			vals := map[string]string{}
			for _, lp := range m.GetLabel() {
				vals[lp.GetName()] = lp.GetValue()
			}
			if vals["stream"] == labels[0] && vals["view"] == labels[1] && vals["phase"] == labels[2] {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
