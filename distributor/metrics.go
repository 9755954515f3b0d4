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
	viewFailed     *prometheus.GaugeVec   // stream, view: 1 while stopped by a bad row
	// wal capture
	position   *prometheus.GaugeVec     // stream: the source position (LSN as a number)
	cycleTime  *prometheus.HistogramVec // stream: snapshot to broker ack of a cycle
	cycleTxns  *prometheus.CounterVec   // stream: source transactions published
	viewRead   *prometheus.CounterVec   // stream, view: seconds a wal cycle spent re-reading the view's changed rows
	rereads    *prometheus.CounterVec   // stream, view, reason: full re-reads
	slotLost   *prometheus.CounterVec   // stream
	slotRetain *prometheus.GaugeVec     // stream: bytes of WAL the slot retains
	slotBehind *prometheus.GaugeVec     // stream: bytes from the slot's confirmed position to the WAL's end
	// slotBehindTime: stream: seconds since the WAL's end was at the slot's confirmed position
	slotBehindTime *prometheus.GaugeVec
	// long work
	readRows   *prometheus.CounterVec   // stream, view, phase: rows read by full reads, records by restores
	epochTime  *prometheus.HistogramVec // stream, view: full read start to broker ack of an epoch
	captureLag *prometheus.GaugeVec     // stream: age of the newest published source commit at its ack
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
		viewFailed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_view_failed",
			Help: "1 while a view is stopped by an error in its data or SQL (its rows stay as last published; retried).",
		}, []string{"stream", "view"}),
		position: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_source_position",
			Help: "Source position (WAL LSN as a number) of the last position record of a wal stream.",
		}, []string{"stream"}),
		cycleTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "statecast_distributor_cycle_duration_seconds",
			Help:    "Duration of a wal cycle, from its snapshot to the broker's ack of its position record.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"stream"}),
		viewRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_view_read_seconds_total",
			Help: "Time wal cycles spent re-reading a view's rows that their transactions changed (its lookups, its hops): what each view costs the stream's cycles.",
		}, []string{"stream", "view"}),
		cycleTxns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_source_transactions_total",
			Help: "PostgreSQL transactions of a wal stream's tables published.",
		}, []string{"stream"}),
		rereads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_full_rereads_total",
			Help: "Full re-reads of a wal view, by reason: unmapped (a change of a table the view cannot map, or a truncate), reconcile, retry.",
		}, []string{"stream", "view", "reason"}),
		slotLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_slot_lost_total",
			Help: "Replication slots found invalidated or dropped, and created again (followed by a full read of every view).",
		}, []string{"stream"}),
		slotRetain: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_slot_retained_bytes",
			Help: "Bytes of WAL the stream's replication slot makes PostgreSQL keep (pg_current_wal_lsn() - restart_lsn), measured every health_interval.",
		}, []string{"stream"}),
		slotBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_slot_behind_bytes",
			Help: "Bytes from the slot's confirmed position to the WAL's current position, measured every health_interval apart from the capture, so it grows while Kafka does not acknowledge.",
		}, []string{"stream"}),
		slotBehindTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_slot_behind_seconds",
			Help: "Seconds since the WAL's current position was at the slot's confirmed position (0: all confirmed), measured every health_interval apart from the capture, so it grows while Kafka does not acknowledge.",
		}, []string{"stream"}),
		readRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statecast_distributor_read_total",
			Help: "Rows read by full reads of a view (phase snapshot: start-up or re-read; reconcile), counted while the read runs; records read back from the topic at start-up (phase restore, view empty).",
		}, []string{"stream", "view", "phase"}),
		epochTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "statecast_distributor_epoch_duration_seconds",
			Help:    "Duration of an epoch, from the start of its full read to the broker's ack of its end.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
		}, []string{"stream", "view"}),
		captureLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "statecast_distributor_capture_lag_seconds",
			Help: "wal streams: at each published cycle, the time from the commit of the newest source transaction it published (with none: from its snapshot) to the broker's ack.",
		}, []string{"stream"}),
	}
	for _, c := range []prometheus.Collector{m.readRows, m.epochTime, m.captureLag, m.rows, m.tombstones, m.pollTime, m.epoch, m.errors, m.active, m.watermarkT, m.incBeyond, m.incNulls, m.produceRetries, m.viewFailed,
		m.position, m.cycleTime, m.viewRead, m.cycleTxns, m.rereads, m.slotLost, m.slotRetain, m.slotBehind, m.slotBehindTime} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
