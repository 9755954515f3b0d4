package demo_test

import (
	"testing"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
)

// TestConfig: the demo config loads; its one stream captures the WAL with no polling or
// reconcile settings (a delete arrives by itself), and its join views declare or select
// the keys of the tables they join.
func TestConfig(t *testing.T) {
	c, err := distributor.ParseConfig(demo.DistributorYAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Streams) != 1 || c.Streams[0].Topic != demo.Topic || len(c.Streams[0].Views) != 4 {
		t.Fatalf("streams %+v", c.Streams)
	}
	s := c.Streams[0]
	if s.Capture != distributor.CaptureWAL {
		t.Errorf("capture %q, want %q", s.Capture, distributor.CaptureWAL)
	}
	want := distributor.ViewSettings{RefreshMode: distributor.ModeReconcile}
	for _, v := range s.Views {
		if v.ViewSettings != want {
			t.Errorf("view %s: %+v, want %+v", v.Name, v.ViewSettings, want)
		}
	}
	for _, v := range s.Views {
		if v.Depends != nil {
			t.Errorf("view %s declares depends %v: the analysis maps every join of the demo by itself", v.Name, v.Depends)
		}
	}
}
