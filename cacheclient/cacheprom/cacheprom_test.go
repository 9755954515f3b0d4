package cacheprom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/cacheclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollector(t *testing.T) {
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cacheclient.Register(c, "events", func(string, []byte) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(c, prometheus.Labels{"stream": "s"}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()] = v
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && l.GetValue() != "s" {
					t.Errorf("%s: stream label %q", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	if len(got) != 28 { // 25, and the snapshot in progress: in_progress, rows_received, elapsed_seconds
		t.Fatalf("%d metric families: %v", len(got), got)
	}
	if got["statecast_cacheclient_applied_index"] != -1 || got["statecast_cacheclient_view_entries"] != 0 || got["statecast_cacheclient_ready"] != 0 ||
		got["statecast_cacheclient_source_position"] != 0 {
		t.Fatalf("values %v", got)
	}
}

// TestCollectorValues: the source position and the per-view decode failures are exported
// with their values, per view.
func TestCollectorValues(t *testing.T) {
	lsn, _ := cacheclient.ParseLSN("16/B374D848")
	stats := cacheclient.Stats{Position: 7, SourcePosition: lsn, Panics: 4, Stopped: true, Snapshot: cacheclient.SnapshotProgress{InProgress: true, Rows: 1234, Elapsed: 3 * time.Second},
		Views: []cacheclient.ViewStats{
			{Name: "events", DecodeErrors: 3, HiddenRows: 2}, {Name: "markets"},
		}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newCollector(func() cacheclient.Stats { return stats }, nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"statecast_cacheclient_source_position":                   float64(0x16_B374D848),
		"statecast_cacheclient_view_decode_errors_total{events}":  3,
		"statecast_cacheclient_view_hidden_rows{events}":          2,
		"statecast_cacheclient_view_decode_errors_total{markets}": 0,
		"statecast_cacheclient_applied_index":                     7,
		"statecast_cacheclient_panics_total":                      4,
		"statecast_cacheclient_stopped":                           1,
		"statecast_cacheclient_snapshot_in_progress":              1,
		"statecast_cacheclient_snapshot_rows_received":            1234,
		"statecast_cacheclient_snapshot_elapsed_seconds":          3,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
