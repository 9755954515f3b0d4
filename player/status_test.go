package player

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStatusAndMetrics: the status page (JSON and HTML) and the Prometheus metrics show
// the stream and a connected target.
func TestStatusAndMetrics(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	// The view has no record yet when the watcher subscribes: declared, it is not unknown.
	tp := startPlayerTB(t, e, func(c *Config) { c.Streams[0].Views = []string{"a"} })
	if err := tp.p.metrics.register(reg); err != nil {
		t.Fatal(err)
	}
	c := newClient("watcher", e.chk, "a")
	go func() { // live entries (the delay histogram counts dispatched entries, not snapshots)
		poll(10*time.Second, func() bool { return targetStatus(tp.p, "watcher").State == "N" })
		e.produce(50, []string{"a"}, 10, newRand(41))
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("session: %v", err)
		}
	}()
	waitFor(t, 30*time.Second, "watcher to ack the last entry", func() bool { return targetStatus(tp.p, "watcher").LastAck >= 49 })

	rec := httptest.NewRecorder()
	tp.p.StatusHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/status.json", nil))
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("status json: %v: %s", err, rec.Body.String())
	}
	if len(st.Streams) != 1 || !st.Streams[0].Ready || st.Streams[0].Current != 49 || st.Streams[0].Topic != e.topic {
		t.Fatalf("status: %+v", st)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/status", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	tp.p.StatusHandler().ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), e.topic) || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status html: %s", rec.Body.String())
	}
	// a request that does not ask for HTML (curl, a script) gets the JSON
	rec = httptest.NewRecorder()
	tp.p.StatusHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("/status without Accept: %v: %s", err, rec.Body.String())
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if f.GetName() == "statecast_player_delivery_delay_seconds" && m.GetHistogram().GetSampleCount() == 0 {
				continue
			}
			found[f.GetName()] = true
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" || (l.GetName() == "service" && l.GetValue() != "watcher") {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	e.check()
	// The per-target metrics are per service (a client without a service name is its own).
	for _, name := range []string{"statecast_player_delivery_delay_seconds", "statecast_player_targets",
		"statecast_player_target_lag_entries", "statecast_player_target_lag_seconds", "statecast_player_target_queue_bytes"} {
		if !found[name] {
			t.Errorf("metric %s missing (have %v)", name, found)
		}
	}
}
