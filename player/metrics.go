package player

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of a player. Per-target gauges are produced at scrape time by targetCollector,
// so a gone target leaves no stale series.
type metrics struct {
	delay       *prometheus.HistogramVec
	recoveries  *prometheus.CounterVec
	overflows   *prometheus.CounterVec
	suspensions *prometheus.CounterVec
	resyncs     *prometheus.CounterVec
	replaced    *prometheus.CounterVec
	targets     *targetCollector
}

func newMetrics(p *Player) *metrics {
	return &metrics{
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "statecast", Subsystem: "player", Name: "delivery_delay_seconds",
			Help:    "Time from the dispatch of a main-stream entry to its write on a target's stream.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"stream"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "recoveries_total",
			Help: "Recovery fetchers started (target resumes behind the main position, or budget overflow).",
		}, []string{"stream"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "budget_overflows_total",
			Help: "Times a target's normal queue passed its byte budget and was dropped (target continues in RF).",
		}, []string{"stream"}),
		suspensions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "suspensions_total",
			Help: "Targets suspended (stream errors, ack time-outs, disconnects, shutdown).",
		}, []string{"stream"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "resyncs_total",
			Help: "Resync-required frames sent, by reason.",
		}, []string{"stream", "reason"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "topic_replaced_total",
			Help: "Times the stream's topic was found deleted and created again (new topic ID): the stream restarted on it.",
		}, []string{"stream"}),
		targets: &targetCollector{p: p},
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.delay, m.recoveries, m.overflows, m.suspensions, m.resyncs, m.replaced, m.targets} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

var (
	descState = prometheus.NewDesc("statecast_player_target_state", "Target queue state (1 for the current state).", []string{"stream", "target", "state"}, nil)
	descTerm  = prometheus.NewDesc("statecast_player_target_term", "Target term.", []string{"stream", "target"}, nil)
	descLag   = prometheus.NewDesc("statecast_player_target_lag_entries", "Main position minus the target's last ack (indexes; gaps included).", []string{"stream", "target"}, nil)
	descLagS  = prometheus.NewDesc("statecast_player_target_lag_seconds", "Age of the oldest record after the target's last ack (0 when caught up; from the log timeline, within 1s).", []string{"stream", "target"}, nil)
	descBytes = prometheus.NewDesc("statecast_player_target_queue_bytes", "Bytes held in the target's queues and unacked batches.", []string{"stream", "target"}, nil)
)

type targetCollector struct{ p *Player }

func (c *targetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descTerm, descLag, descLagS, descBytes} {
		ch <- d
	}
}

func (c *targetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.p.Status().Streams {
		for _, t := range st.Targets {
			for _, s := range []State{StateN, StateRF, StateFC, StateS} {
				v := 0.0
				if s.String() == t.State {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, st.Name, t.ID, s.String())
			}
			ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(t.Term), st.Name, t.ID)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(t.LagEntries), st.Name, t.ID)
			ch <- prometheus.MustNewConstMetric(descLagS, prometheus.GaugeValue, t.LagSeconds, st.Name, t.ID)
			ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(t.QueueBytes), st.Name, t.ID)
		}
	}
}
