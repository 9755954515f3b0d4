package distributor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the distributor's Prometheus metrics (listed in docs/operations.md).
type metrics struct {
	rows       *prometheus.CounterVec   // stream, view
	tombstones *prometheus.CounterVec   // stream, view
	pollTime   *prometheus.HistogramVec // stream, view
	epoch      *prometheus.GaugeVec     // stream, view
	errors     *prometheus.CounterVec   // stream, view, op
	active     *prometheus.GaugeVec     // stream
	watermarkT *prometheus.GaugeVec     // stream, view: unix seconds of a time watermark
	incBeyond  *prometheus.CounterVec   // stream, view: published rows that did not move the watermark
	incNulls   *prometheus.GaugeVec     // stream, view: rows with a NULL incremental value
	// produceRetries counts sarama's retries of produce requests (broker slow or down).
	produceRetries *prometheus.CounterVec // stream
}

// newMetrics creates the metrics and registers them with reg.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_rows_published_total",
			Help: "Row records published (acknowledged by the broker).",
		}, []string{"stream", "view"}),
		tombstones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_tombstones_total",
			Help: "Tombstones published for keys that vanished from a view.",
		}, []string{"stream", "view"}),
		pollTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "statecast_distributor_poll_duration_seconds",
			Help:    "Duration of an incremental poll, from query start to broker ack.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"stream", "view"}),
		epoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_last_epoch",
			Help: "Last completed epoch of a view.",
		}, []string{"stream", "view"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_errors_total",
			Help: "Errors by operation (snapshot, poll, reconcile, produce, listen, lock); retried with backoff.",
		}, []string{"stream", "view", "op"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_active",
			Help: "1 when this process holds the stream's advisory lock and publishes it.",
		}, []string{"stream"}),
		watermarkT: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_watermark_seconds",
			Help: "Incremental watermark of a view (unix seconds, time columns) or version.",
		}, []string{"stream", "view"}),
		incBeyond: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_incremental_beyond_total",
			Help: "Rows published whose incremental value is beyond the database clock (a future time, infinity) or NaN: the watermark does not move to it.",
		}, []string{"stream", "view"}),
		incNulls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_incremental_nulls",
			Help: "Rows of a polled view whose incremental value is NULL, at its last epoch: polls never read them, only epochs publish their changes.",
		}, []string{"stream", "view"}),
		produceRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_produce_retries_total",
			Help: "Produce requests retried by the Kafka client (broker slow, down or timed out).",
		}, []string{"stream"}),
	}
	for _, c := range []prometheus.Collector{m.rows, m.tombstones, m.pollTime, m.epoch, m.errors, m.active, m.watermarkT, m.incBeyond, m.incNulls, m.produceRetries} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
