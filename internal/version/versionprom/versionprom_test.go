package versionprom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/statecast/statecast/internal/version"
)

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector(version.Info{Version: "v0.1.0", Commit: "abc", GoVersion: "go1.26.0"}))
	want := `# HELP statecast_build_info The running binary's build: version, commit, goversion (value always 1).
# TYPE statecast_build_info gauge
statecast_build_info{commit="abc",goversion="go1.26.0",version="v0.1.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "statecast_build_info"); err != nil {
		t.Fatal(err)
	}
}
