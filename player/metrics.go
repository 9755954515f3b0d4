package player

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/internal/daemon"
)

// metrics of a player. Per-target gauges are produced at scrape time by targetCollector,
// so a gone target leaves no stale series.
type metrics struct {
	delay        *prometheus.HistogramVec
	recoveries   *prometheus.CounterVec
	overflows    *prometheus.CounterVec
	suspensions  *prometheus.CounterVec
	resyncs      *prometheus.CounterVec
	replacements *prometheus.CounterVec
	// topicReplaced counts a stream's topic found deleted and created again.
	topicReplaced *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	targets       *targetCollector
	tokens        *daemon.TokenCollector
	p             *Player
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
		replacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "replacements_total",
			Help: "Targets replaced by a new connection of the same instance (same principal and instance id).",
		}, []string{"stream"}),
		topicReplaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "topic_replaced_total",
			Help: "Times the stream's topic was found deleted and created again (new topic ID): the stream restarted on it.",
		}, []string{"stream"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "records_skipped_total",
			Help: "Records of the log never served, by reason (view_mismatch: a row whose sc-view header names another view than its key; too_large: over max_record_bytes).",
		}, []string{"stream", "reason"}),
		targets: &targetCollector{p: p},
		tokens:  daemon.NewTokenCollector("statecast_player"),
		p:       p,
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	adminFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "statecast", Subsystem: "player", Name: "admin_auth_failures_total",
		Help: "Admin endpoint requests refused for their bearer token (none, or a wrong one).",
	}, func() float64 {
		if m.p.admin == nil {
			return 0
		}
		return float64(m.p.admin.AuthFailures())
	})
	for _, c := range []prometheus.Collector{m.delay, m.recoveries, m.overflows, m.suspensions, m.resyncs, m.replacements, m.topicReplaced, m.skipped, m.targets, m.tokens, m.p.conns, m.p.auth.failures, m.p.limits, adminFailures} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// The per-target metrics are labelled by service, not by instance: the replicas of a
// service share one series each, so that a thousand subscribers of a few services make a
// few series, not thousands (per-instance detail is on the status page).
var (
	descTargets = prometheus.NewDesc("statecast_player_targets", "Targets of the service in each queue state.", []string{"stream", "service", "state"}, nil)
	descLag     = prometheus.NewDesc("statecast_player_target_lag_entries", "Main position minus the last ack, the highest over the service's targets (indexes; gaps included).", []string{"stream", "service"}, nil)
	descLagS    = prometheus.NewDesc("statecast_player_target_lag_seconds", "Age of the oldest record after a target's last ack, the highest over the service's targets (0 when caught up; from the log timeline, within 1s).", []string{"stream", "service"}, nil)
	descBytes   = prometheus.NewDesc("statecast_player_target_queue_bytes", "Bytes held in the queues and unacked batches of the service's targets, summed.", []string{"stream", "service"}, nil)
	// One series per state, 1 for the stream's current one: an alert on
	// state!="ready" == 1 sees a stream that serves nothing while the others do.
	descStreamState = prometheus.NewDesc("statecast_player_stream_state", "1 for the stream's current state (starting, ready, error, unavailable), 0 for the others.", []string{"stream", "state"}, nil)
)

// streamStates are the values of statecast_player_stream_state's state label.
var streamStates = []string{StreamStarting, StreamReady, StreamError, StreamUnavailable}

type targetCollector struct {
	p *Player

	mu sync.Mutex
	// labelled are the services with series of their own: the first MaxServiceLabels
	// seen, for the player's life, so that clients naming new services cannot grow the
	// series without bound (nor make a service's series move to "_other" and back).
	labelled map[string]bool
}

// otherService is the service label of the targets of services past MaxServiceLabels.
const otherService = "_other"

// label is the service label of svc.
func (c *targetCollector) label(svc string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.labelled[svc] {
		return svc
	}
	if len(c.labelled) >= c.p.cfg.MaxServiceLabels {
		return otherService
	}
	if c.labelled == nil {
		c.labelled = map[string]bool{}
	}
	c.labelled[svc] = true
	return svc
}

func (c *targetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTargets, descLag, descLagS, descBytes, descStreamState} {
		ch <- d
	}
}

// serviceStats aggregates the targets of one service of one stream.
type serviceStats struct {
	states     map[string]int
	lag        int64
	lagSeconds float64
	bytes      int64
}

func (c *targetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.p.Status().Streams {
		for _, state := range streamStates {
			v := 0.0
			if st.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descStreamState, prometheus.GaugeValue, v, st.Name, state)
		}
		by := map[string]*serviceStats{}
		var order []string
		for _, t := range st.Targets {
			svc := c.label(t.Service)
			a := by[svc]
			if a == nil {
				a = &serviceStats{states: map[string]int{}}
				by[svc] = a
				order = append(order, svc)
			}
			a.states[t.State]++
			a.lag = max(a.lag, t.LagEntries)
			a.lagSeconds = max(a.lagSeconds, t.LagSeconds)
			a.bytes += t.QueueBytes
		}
		for _, svc := range order {
			a := by[svc]
			for _, s := range []State{StateN, StateRF, StateFC, StateS} {
				ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(a.states[s.String()]), st.Name, svc, s.String())
			}
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(a.lag), st.Name, svc)
			ch <- prometheus.MustNewConstMetric(descLagS, prometheus.GaugeValue, a.lagSeconds, st.Name, svc)
			ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(a.bytes), st.Name, svc)
		}
	}
}
