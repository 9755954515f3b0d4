package cacheprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/cacheclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollector(t *testing.T) {
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", ClientID: "t"})
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
	if len(got) != 20 {
		t.Fatalf("%d metric families: %v", len(got), got)
	}
	if got["statecast_cacheclient_applied_index"] != -1 || got["statecast_cacheclient_view_entries"] != 0 || got["statecast_cacheclient_ready"] != 0 {
		t.Fatalf("values %v", got)
	}
}
