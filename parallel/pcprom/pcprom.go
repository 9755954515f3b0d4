// Package pcprom exports the stats of parallel engines as Prometheus metrics: in-flight,
// queued, completed, failed, retried, watermark, encoded-metadata size and paused, one series
// per engine (label "engine"). It keeps Prometheus out of the parallel package itself.
//
// The Collector calls its source function on the scraping goroutine; the function must be
// safe for concurrent use (Engine.Stats and saramapc.Consumer.Stats are).
package pcprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/parallel"
)

// Source returns the current stats by engine name.
type Source func() map[string]parallel.Stats

// Collector is a prometheus.Collector over a Source.
type Collector struct {
	src   Source
	descs []metric
}

type metric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(parallel.Stats) float64
}

// NewCollector returns a collector with metric names prefixed by namespace (e.g. "statecast").
func NewCollector(namespace string, src Source) *Collector {
	m := func(name, help string, typ prometheus.ValueType, v func(parallel.Stats) float64) metric {
		return metric{prometheus.NewDesc(prometheus.BuildFQName(namespace, "parallel", name), help, []string{"engine"}, nil), typ, v}
	}
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	return &Collector{src: src, descs: []metric{
		m("in_flight", "Records being processed or waiting for a retry.", prometheus.GaugeValue, func(s parallel.Stats) float64 { return float64(s.InFlight) }),
		m("queued", "Records submitted and not yet dispatched.", prometheus.GaugeValue, func(s parallel.Stats) float64 { return float64(s.Queued) }),
		m("completed_total", "Records completed successfully.", prometheus.CounterValue, func(s parallel.Stats) float64 { return float64(s.Completed) }),
		m("failed_total", "Records whose attempts were exhausted.", prometheus.CounterValue, func(s parallel.Stats) float64 { return float64(s.Failed) }),
		m("retried_total", "Failed attempts that were retried.", prometheus.CounterValue, func(s parallel.Stats) float64 { return float64(s.Retried) }),
		m("watermark", "Committable low watermark (next offset to read).", prometheus.GaugeValue, func(s parallel.Stats) float64 { return float64(s.Watermark) }),
		m("metadata_bytes", "Estimated size of the encoded completed-offsets metadata.", prometheus.GaugeValue, func(s parallel.Stats) float64 { return float64(s.MetadataBytes) }),
		m("paused", "1 when intake is paused by the 75% metadata rule.", prometheus.GaugeValue, func(s parallel.Stats) float64 { return b(s.Paused) }),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.descs {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.src() {
		for _, m := range c.descs {
			ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(s), name)
		}
	}
}
