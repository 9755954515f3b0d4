package pcprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/parallel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollector(t *testing.T) {
	c := NewCollector("statecast", func() map[string]parallel.Stats {
		return map[string]parallel.Stats{"t/0": {InFlight: 3, Queued: 4, Completed: 10, Failed: 1, Retried: 2, Watermark: 42, MetadataBytes: 17, Paused: true}}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "engine" || l[0].GetValue() != "t/0" {
				t.Fatalf("%s labels %v", mf.GetName(), l)
			}
			if m.Gauge != nil {
				got[mf.GetName()] = m.GetGauge().GetValue()
			} else {
				got[mf.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"statecast_parallel_in_flight": 3, "statecast_parallel_queued": 4, "statecast_parallel_completed_total": 10,
		"statecast_parallel_failed_total": 1, "statecast_parallel_retried_total": 2, "statecast_parallel_watermark": 42,
		"statecast_parallel_metadata_bytes": 17, "statecast_parallel_paused": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d metrics, want %d", len(got), len(want))
	}
}
