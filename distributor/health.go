package distributor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
)

// health is what /readyz reports: whether Run got past its start-up, and the last check
// of each dependency. A dependency counts as down from its first failed check until a
// check succeeds; before the first check it is unknown (not ready).
type health struct {
	mu      sync.Mutex
	phase   string // "starting" (topics not checked yet), "running", "stopped"
	pg      depState
	kafka   depState
	checked bool // both checked at least once
}

type depState struct {
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	Since time.Time `json:"since"` // when it last changed
}

func (s *depState) set(err error, now time.Time) {
	ok := err == nil
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if ok != s.OK || s.Since.IsZero() {
		s.Since = now
	}
	s.OK, s.Error = ok, msg
}

func (h *health) setPhase(p string) {
	h.mu.Lock()
	h.phase = p
	h.mu.Unlock()
}

// watchDeps checks PostgreSQL (a ping through the pool) and Kafka (a cluster description
// through admin) every interval until ctx ends. Each check is bounded by the interval, so
// a dependency that hangs counts as down.
func (d *Distributor) watchDeps(ctx context.Context, pool *pgxpool.Pool, admin sarama.ClusterAdmin, interval time.Duration) {
	// The Kafka client has no context: a check that outlasts the interval is left to end on
	// its own (within kafka.timeout) and counts as down; no second one starts meanwhile.
	var kafkaCheck chan error
	check := func() {
		cctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		pgErr := pool.Ping(cctx)
		if kafkaCheck == nil {
			kafkaCheck = make(chan error, 1)
			go func(done chan<- error) {
				_, _, err := admin.DescribeCluster()
				done <- err
			}(kafkaCheck)
		}
		var kafkaErr error
		select {
		case kafkaErr = <-kafkaCheck:
			kafkaCheck = nil
		case <-cctx.Done():
			kafkaErr = fmt.Errorf("no answer within %s", interval)
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		d.health.mu.Lock()
		wasPG, wasKafka, first := d.health.pg.OK, d.health.kafka.OK, !d.health.checked
		d.health.pg.set(pgErr, now)
		d.health.kafka.set(kafkaErr, now)
		d.health.checked = true
		d.health.mu.Unlock()
		if pgErr != nil && (wasPG || first) {
			d.log.Warn("health: PostgreSQL does not answer", "err", pgErr)
		} else if pgErr == nil && !wasPG && !first {
			d.log.Info("health: PostgreSQL answers again")
		}
		if kafkaErr != nil && (wasKafka || first) {
			d.log.Warn("health: Kafka does not answer", "err", kafkaErr)
		} else if kafkaErr == nil && !wasKafka && !first {
			d.log.Info("health: Kafka answers again")
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Readiness is what /readyz answers, as JSON.
type Readiness struct {
	// Ready: Run got past its start-up, PostgreSQL and Kafka answered the last checks, and
	// every stream is a standby or an active one past its start-up epochs.
	Ready    bool              `json:"ready"`
	Phase    string            `json:"phase"` // starting, running, stopped
	Postgres depState          `json:"postgres"`
	Kafka    depState          `json:"kafka"`
	Streams  map[string]string `json:"streams"` // topic: standby, starting (active, start-up epochs), active
	// LastErrors are the streams' last errors (topic: the error; streams without one are
	// left out), as Status reports them with their time.
	LastErrors map[string]string `json:"last_errors,omitempty"`
}

// Readiness reports whether this Distributor is a healthy active or standby (/readyz).
func (d *Distributor) Readiness() Readiness {
	d.health.mu.Lock()
	r := Readiness{Phase: d.health.phase, Postgres: d.health.pg, Kafka: d.health.kafka, Streams: map[string]string{}}
	checked := d.health.checked
	d.health.mu.Unlock()
	d.mu.Lock()
	streams := d.streams
	d.mu.Unlock()
	r.Ready = r.Phase == "running" && checked && r.Postgres.OK && r.Kafka.OK
	for _, s := range streams {
		s.statusMu.Lock()
		if e := s.lastErr; e.msg != "" {
			if r.LastErrors == nil {
				r.LastErrors = map[string]string{}
			}
			r.LastErrors[s.cfg.Topic] = e.msg
		}
		s.statusMu.Unlock()
		switch {
		case !s.active.Load():
			r.Streams[s.cfg.Topic] = "standby"
		case s.serving.Load():
			r.Streams[s.cfg.Topic] = "active"
		default:
			r.Streams[s.cfg.Topic] = "starting"
			r.Ready = false
		}
	}
	return r
}

func (d *Distributor) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	r := d.Readiness()
	w.Header().Set("Content-Type", "application/json")
	if !r.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(r)
}
