package version

import "github.com/prometheus/client_golang/prometheus"

// Collector is the statecast_build_info gauge: always 1, its labels say which build is
// running, so that a dashboard can show a rollout and an alert can join on the version.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "statecast_build_info",
		Help:        "The running binary's build: version, commit, goversion (value always 1).",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

// Attrs are the version as log attributes, for a start-up line.
func (i Info) Attrs() []any {
	return []any{"version", i.Version, "commit", i.Commit, "go", i.GoVersion}
}
