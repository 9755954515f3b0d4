// Package versionprom exports a build's version as the statecast_build_info metric. It is
// apart from package version so that cacheclient, which shows its version on its status
// page, does not depend on the Prometheus client.
package versionprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/internal/version"
)

// Collector is the statecast_build_info gauge of i: always 1, its labels say which build is
// running, so that a dashboard can show a rollout and an alert can join on the version.
func Collector(i version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "statecast_build_info",
		Help:        "The running binary's build: version, commit, goversion (value always 1).",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
