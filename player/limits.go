package player

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// principalLimits bound what one principal holds at once, over all streams: its targets
// (Config.MaxTargetsPerPrincipal) and its recoveries that read Kafka, each with a consumer
// of its own (Config.MaxKafkaRecoveriesPerPrincipal). A principal is a token's name or a
// certificate's identity; without authentication every client is the one anonymous
// principal. Principals are not metric labels (a CA may sign any number of identities):
// the metrics are totals.
type principalLimits struct {
	maxTargets, maxKafka int
	refused              *prometheus.CounterVec // by limit

	mu  sync.Mutex
	use map[string]*principalUse // only principals holding or waiting for something
}

type principalUse struct {
	targets, kafka, waiting int
	freed                   chan struct{} // closed, and replaced, when a Kafka slot frees
}

func newPrincipalLimits(c *Config) *principalLimits {
	return &principalLimits{maxTargets: c.MaxTargetsPerPrincipal, maxKafka: c.MaxKafkaRecoveriesPerPrincipal, use: map[string]*principalUse{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "principal_limit_refusals_total",
			Help: "Subscriptions refused because their principal was at a per-principal bound (max_targets_per_principal).",
		}, []string{"limit"})}
}

// getLocked returns name's use, made when it has none. l.mu held.
func (l *principalLimits) getLocked(name string) *principalUse {
	u := l.use[name]
	if u == nil {
		u = &principalUse{freed: make(chan struct{})}
		l.use[name] = u
	}
	return u
}

// putLocked forgets name's use when it holds and waits for nothing. l.mu held.
func (l *principalLimits) putLocked(name string, u *principalUse) {
	if u.targets == 0 && u.kafka == 0 && u.waiting == 0 {
		delete(l.use, name)
	}
}

// acquireTarget takes one of name's target slots, or reports false (counted) when it holds
// them all.
func (l *principalLimits) acquireTarget(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.getLocked(name)
	if u.targets >= l.maxTargets {
		l.putLocked(name, u)
		l.refused.WithLabelValues("max_targets_per_principal").Inc()
		return false
	}
	u.targets++
	return true
}

func (l *principalLimits) releaseTarget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.getLocked(name)
	u.targets--
	l.putLocked(name, u)
}

// acquireKafka takes one of name's Kafka recovery slots, waiting for one to free; ok is
// false when stop closed first. waited reports that it had to wait.
func (l *principalLimits) acquireKafka(name string, stop ...<-chan struct{}) (ok, waited bool) {
	for {
		l.mu.Lock()
		u := l.getLocked(name)
		if u.kafka < l.maxKafka {
			u.kafka++
			if waited {
				u.waiting--
			}
			l.mu.Unlock()
			return true, waited
		}
		if !waited {
			u.waiting++
			waited = true
		}
		freed := u.freed
		l.mu.Unlock()
		if !waitAny(freed, stop) {
			l.mu.Lock()
			u.waiting--
			l.putLocked(name, u)
			l.mu.Unlock()
			return false, true
		}
	}
}

// waitAny waits for freed (true) or one of stop (false).
func waitAny(freed <-chan struct{}, stop []<-chan struct{}) bool {
	var s0, s1 <-chan struct{}
	if len(stop) > 0 {
		s0 = stop[0]
	}
	if len(stop) > 1 {
		s1 = stop[1]
	}
	select {
	case <-freed:
		return true
	case <-s0:
	case <-s1:
	}
	return false
}

func (l *principalLimits) releaseKafka(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.getLocked(name)
	u.kafka--
	close(u.freed)
	u.freed = make(chan struct{})
	l.putLocked(name, u)
}

func (l *principalLimits) kafkaOpen() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.use {
		n += u.kafka
	}
	return n
}

func (l *principalLimits) kafkaWaiting() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.use {
		n += u.waiting
	}
	return n
}

var (
	descKafkaRecoveries = prometheus.NewDesc("statecast_player_kafka_recoveries", "Recoveries reading Kafka now, each with a consumer of its own.", nil, nil)
	descKafkaWaiting    = prometheus.NewDesc("statecast_player_kafka_recoveries_waiting", "Recoveries waiting for a Kafka slot of their principal (max_kafka_recoveries_per_principal).", nil, nil)
)

func (l *principalLimits) Describe(ch chan<- *prometheus.Desc) {
	ch <- descKafkaRecoveries
	ch <- descKafkaWaiting
	l.refused.Describe(ch)
}

func (l *principalLimits) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descKafkaRecoveries, prometheus.GaugeValue, float64(l.kafkaOpen()))
	ch <- prometheus.MustNewConstMetric(descKafkaWaiting, prometheus.GaugeValue, float64(l.kafkaWaiting()))
	l.refused.Collect(ch)
}
