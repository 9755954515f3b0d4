// Package cacheprom exports a cacheclient.Client's metrics to Prometheus. It lives apart
// from cacheclient so that services embedding the cache do not depend on the Prometheus
// client unless they ask for it.
//
// The collector reads Client.Stats on every scrape (no goroutine, no hooks): register it
// with prometheus.MustRegister(cacheprom.NewCollector(client)).
package cacheprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/cacheclient"
)

// Collector is a prometheus.Collector over one client.
type Collector struct {
	stats func() cacheclient.Stats

	position, sourcePosition, lag, lagEntries, staleness *prometheus.Desc
	connected, ready, stopped                            *prometheus.Desc
	entries, batches, snapshots, resyncs, reconnects     *prometheus.Desc
	epochChecks, epochMismatches, decodeErrs             *prometheus.Desc
	handlerErrs, persists, persistErrs, panics           *prometheus.Desc
	viewLen, viewPosition, viewMemory                    *prometheus.Desc
	viewDecodeErrs, viewHidden                           *prometheus.Desc
	snapActive, snapRows, snapSeconds                    *prometheus.Desc
}

// NewCollector returns a collector for c; constLabels are added to every metric (for
// example the stream name when a service runs several clients).
func NewCollector(c *cacheclient.Client, constLabels prometheus.Labels) *Collector {
	return newCollector(c.Stats, constLabels)
}

func newCollector(stats func() cacheclient.Stats, constLabels prometheus.Labels) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("statecast_cacheclient_"+name, help, labels, constLabels)
	}
	return &Collector{
		stats: stats,
		// A float64 holds an LSN exactly up to 2^53 bytes of WAL (8 PiB).
		sourcePosition: d("source_position", "Applied source position: the PostgreSQL WAL position (LSN) of the last position record applied, in bytes (0: none)."),
		// The metric names keep the protocol's word, index, for a stream position (the
		// record's index in the stream): Stats.Position, ViewStats.Position.
		position:        d("applied_index", "Stream position (the record's index in the stream) the client has applied."),
		lag:             d("lag_seconds", "Delay from source time to publication of the last applied batch."),
		lagEntries:      d("lag_entries", "Stream positions between the applied position and the player's head (head_index of the last frame): an upper bound of the entries behind."),
		staleness:       d("staleness_seconds", "Now minus the source time of the last applied row."),
		connected:       d("connected", "1 while a Subscribe stream is open."),
		ready:           d("ready", "1 once the initial state is complete."),
		stopped:         d("stopped", "1 once the client stopped on a refusal that retrying cannot heal (an unknown view or stream, a missing grant): it stays stopped until closed."),
		entries:         d("entries_applied_total", "Entries of live batches applied."),
		batches:         d("batches_applied_total", "Live batches applied."),
		snapshots:       d("snapshots_applied_total", "Snapshots applied (bootstrap and resync)."),
		resyncs:         d("resyncs_total", "Resyncs (ResyncRequired or epoch mismatch)."),
		reconnects:      d("reconnects_total", "Streams that ended and were reopened."),
		epochChecks:     d("epoch_checks_total", "Epoch-end checks run."),
		epochMismatches: d("epoch_mismatches_total", "Epoch-end checks that failed."),
		decodeErrs:      d("decode_errors_total", "Rows the decoder refused."),
		handlerErrs:     d("handler_errors_total", "Changes whose handler attempts were exhausted."),
		panics:          d("panics_total", "Panics of the service's decoders, index functions and change handlers that the client recovered."),
		persists:        d("state_files_written_total", "State files written."),
		persistErrs:     d("state_file_errors_total", "State files that could not be written."),
		viewLen:         d("view_entries", "Objects in the view.", "view"),
		viewPosition:    d("view_index", "Stream position (the record's index in the stream) the view reflects.", "view"),
		viewMemory:      d("view_memory_bytes", "Estimated memory of the view.", "view"),
		viewDecodeErrs:  d("view_decode_errors_total", "Rows of the view its decoder refused (each kept out of the view until a later version decodes).", "view"),
		viewHidden:      d("view_hidden_rows", "Rows of the view its decoder refused that are kept out of it now.", "view"),
		snapActive:      d("snapshot_in_progress", "1 while a snapshot (bootstrap or resync) is being received."),
		snapRows:        d("snapshot_rows_received", "Rows received of the snapshot in progress (0: none)."),
		snapSeconds:     d("snapshot_elapsed_seconds", "Time since the snapshot in progress began (0: none)."),
	}
}

// Describe implements prometheus.Collector.
func (k *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{k.position, k.sourcePosition, k.lag, k.lagEntries, k.staleness, k.connected, k.ready,
		k.stopped, k.entries, k.batches, k.snapshots, k.resyncs, k.reconnects, k.epochChecks, k.epochMismatches,
		k.decodeErrs, k.handlerErrs, k.panics, k.persists, k.persistErrs, k.viewLen, k.viewPosition, k.viewMemory,
		k.viewDecodeErrs, k.viewHidden, k.snapActive, k.snapRows, k.snapSeconds} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (k *Collector) Collect(ch chan<- prometheus.Metric) {
	s := k.stats()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	cnt := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	g(k.position, float64(s.Position))
	g(k.sourcePosition, float64(s.SourcePosition))
	g(k.lag, s.Lag.Seconds())
	g(k.lagEntries, float64(s.LagEntries))
	g(k.staleness, s.Staleness.Seconds())
	g(k.connected, b2f(s.Connected))
	g(k.ready, b2f(s.Ready))
	g(k.stopped, b2f(s.Stopped))
	cnt(k.entries, s.EntriesApplied)
	cnt(k.batches, s.Batches)
	cnt(k.snapshots, s.SnapshotsApplied)
	cnt(k.resyncs, s.Resyncs)
	cnt(k.reconnects, s.Reconnects)
	cnt(k.epochChecks, s.EpochChecks)
	cnt(k.epochMismatches, s.EpochMismatches)
	cnt(k.decodeErrs, s.DecodeErrors)
	cnt(k.handlerErrs, s.HandlerErrors)
	cnt(k.panics, s.Panics)
	cnt(k.persists, s.Persists)
	cnt(k.persistErrs, s.PersistErrors)
	g(k.snapActive, b2f(s.Snapshot.InProgress))
	g(k.snapRows, float64(s.Snapshot.Rows))
	g(k.snapSeconds, s.Snapshot.Elapsed.Seconds())
	for _, v := range s.Views {
		g(k.viewLen, float64(v.Len), v.Name)
		g(k.viewPosition, float64(v.Position), v.Name)
		g(k.viewMemory, float64(v.MemoryBytes), v.Name)
		cnt(k.viewDecodeErrs, v.DecodeErrors, v.Name)
		g(k.viewHidden, float64(v.HiddenRows), v.Name)
	}
}
