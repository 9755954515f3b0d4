package player

import (
	"context"
	"errors"
	"fmt"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/internal/backoff"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// The states of a stream, as Status, /readyz, /healthz and the status page name them.
const (
	// StreamStarting: the main fetcher loads the materialized copy (a Hello waits for it).
	StreamStarting = "starting"
	// StreamReady: the main fetcher reads the log; targets are admitted.
	StreamReady = "ready"
	// StreamError: the main fetcher (or the check of its topic) fails now; connected
	// targets keep what they have and new ones may be admitted from the last copy read,
	// but nothing new arrives until the cause clears.
	StreamError = "error"
	// StreamUnavailable: the topic cannot be served (missing, several partitions,
	// unreadable) or the main fetcher stopped: a Hello is refused with Unavailable naming
	// why, and the stream tries again with backoff.
	StreamUnavailable = "unavailable"
)

// phase is where a stream is in its life (stream.run). What it shows (stateLocked) is the
// phase unless a current cause says otherwise.
type phase int

const (
	phaseStarting    phase = iota // attaching to the topic or loading the copy
	phaseServing                  // the copy caught up: targets are admitted
	phaseUnavailable              // the topic cannot be served: retried after retryAt
)

// causeKind names a check whose failure is a current cause of the error state. Each
// cause is set by its check when it fails and cleared by the same check when it passes
// again, so that the state never outlives what made it: an error seen once stays visible
// as the last error, not as the state.
type causeKind int

const (
	// causeFetch: the main fetcher's partition consumer reports errors. Cleared when it
	// delivers a record again, or when nothing it could deliver is left in the log.
	causeFetch causeKind = iota
	// causeTopic: the topic check (every topicCheck) failed or found the topic missing.
	// Cleared when it finds the topic again.
	causeTopic
	nCauses
)

// stateLocked is the stream's state and its current cause ("" when there is none),
// derived from the phase and the current causes. s.mu held.
func (s *stream) stateLocked() (state, cause string) {
	if s.phase == phaseUnavailable {
		return StreamUnavailable, s.down.Error()
	}
	for _, c := range s.causes {
		if c != "" {
			return StreamError, c
		}
	}
	if s.phase == phaseServing {
		return StreamReady, ""
	}
	return StreamStarting, ""
}

// isReady reports whether the materialized copy has caught up (targets are admitted).
func (s *stream) isReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase == phaseServing
}

// noteErrorLocked keeps msg as the last error, which the status shows with its time
// whatever the state. s.mu held.
func (s *stream) noteErrorLocked(msg string) {
	s.lastErr, s.lastErrAt = msg, time.Now()
}

// changedLocked wakes whoever waits for the stream's state to change (waitServing);
// the caller then calls p.stateChanged, without s.mu. s.mu held.
func (s *stream) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// setCause makes msg the current cause of kind and reports whether it is new (the caller
// logs it then, not at every repetition).
func (s *stream) setCause(kind causeKind, msg string) bool {
	s.mu.Lock()
	s.noteErrorLocked(msg)
	if s.causes[kind] == msg {
		s.mu.Unlock()
		return false
	}
	s.causes[kind] = msg
	s.changedLocked()
	s.mu.Unlock()
	s.p.stateChanged()
	return true
}

// clearCause ends the current cause of kind: its check passed. It returns the cause that
// ended ("" when there was none).
func (s *stream) clearCause(kind causeKind) string {
	s.mu.Lock()
	was := s.causes[kind]
	if was == "" {
		s.mu.Unlock()
		return ""
	}
	s.causes[kind] = ""
	s.changedLocked()
	s.mu.Unlock()
	s.p.stateChanged()
	return was
}

// markReady: the materialized copy has caught up with the log (start, end): targets are
// admitted from now on.
func (s *stream) markReady(start, end int64) {
	s.mu.Lock()
	if s.phase == phaseServing {
		s.mu.Unlock()
		return
	}
	s.phase, s.settled = phaseServing, true
	n := s.nrows
	s.changedLocked()
	s.mu.Unlock()
	s.p.stateChanged()
	s.log.Info("stream ready", "log_start", start, "log_end", end, "current", s.current.Load(), "rows", n)
}

// attached: the topic can be served again after it could not; the main fetcher loads it.
func (s *stream) attached() {
	s.mu.Lock()
	if s.phase != phaseUnavailable {
		s.mu.Unlock()
		return
	}
	s.phase, s.down, s.retryAt = phaseStarting, nil, time.Time{}
	s.changedLocked()
	s.mu.Unlock()
	s.p.stateChanged()
	s.log.Info("stream available again: loading its topic", "topic", s.cfg.Topic)
}

// fail makes the stream unavailable for err until retryAt: its copy and history are
// dropped (what the main fetcher stopped on may be a log truncated or replaced under
// them; the next attempt reads the topic from its start), its targets end with err
// (Unavailable: their clients resubscribe, here once it serves again or to another
// player) and a Hello is refused with err.
func (s *stream) fail(err error, retryAt time.Time) {
	s.mu.Lock()
	s.phase, s.down, s.retryAt, s.settled = phaseUnavailable, err, retryAt, true
	s.causes = [nCauses]string{} // the checks of a main fetcher that no longer runs
	s.noteErrorLocked(err.Error())
	targets := s.resetLocked()
	s.changedLocked()
	s.mu.Unlock()
	for _, t := range targets {
		t.suspend(err)
	}
	s.p.stateChanged()
}

// refusalLocked is the error a Hello gets from an unavailable stream: why, and when it is
// tried again. s.mu held.
func (s *stream) refusalLocked() error {
	if wait := time.Until(s.retryAt); wait > 0 {
		return fmt.Errorf("%w (tried again in %s)", s.down, wait.Round(100*time.Millisecond))
	}
	return fmt.Errorf("%w (being tried again)", s.down)
}

// waitServing waits until the stream admits targets: nil once it serves, the refusal
// when it is unavailable, the end of ctx or of the player otherwise.
func (s *stream) waitServing(ctx context.Context) error {
	for {
		s.mu.Lock()
		ph, changed := s.phase, s.changed
		var err error
		if ph == phaseUnavailable {
			err = s.refusalLocked()
		}
		s.mu.Unlock()
		switch ph {
		case phaseServing:
			return nil
		case phaseUnavailable:
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.p.ctx.Done():
			return ErrClosed
		}
	}
}

// unavailableError is why a stream cannot be served: ErrStreamUnavailable and the cause
// (kafkaconn.ErrTopicMissing, a sarama error) for errors.Is, with a message that names the
// stream, the topic and what is wrong with it.
type unavailableError struct {
	msg   string
	cause error
}

func (e *unavailableError) Error() string   { return e.msg }
func (e *unavailableError) Unwrap() []error { return []error{ErrStreamUnavailable, e.cause} }

// unavailable returns the error of a stream that cannot be served for cause; detail says
// why in words (the cause's text when it is empty).
func (s *stream) unavailable(cause error, detail string) error {
	if detail == "" {
		detail = cause.Error()
	}
	return &unavailableError{msg: fmt.Sprintf("%v: stream %q (topic %q): %s", ErrStreamUnavailable, s.cfg.Name, s.cfg.Topic, detail), cause: cause}
}

// errNotReady: the stream is loading its copy again (admit after it failed and came back).
var errNotReady = errors.New("player: the stream is loading its topic")

// retryDelay is how long an unavailable stream waits before its attempt number attempt
// (from 0): 500ms, doubling up to 30s, jittered (internal/backoff).
func retryDelay(attempt int) time.Duration { return streamRetry.Delay(attempt) }

var streamRetry = backoff.Policy{Min: 500 * time.Millisecond, Max: 30 * time.Second}

// Readiness is what /readyz answers and what gRPC health says (SERVING when Ready).
type Readiness struct {
	// Ready: Kafka answered at start-up, no stream is still loading its copy for the
	// first time, and at least one stream is ready. A stream that cannot be served does
	// not hold the others back: it is named in Streams and Errors.
	Ready bool `json:"ready"`
	// Kafka is the start-up's connection to Kafka: ok once it answered.
	Kafka KafkaReadiness `json:"kafka"`
	// Streams is every stream's state (StreamStarting, StreamReady, StreamError,
	// StreamUnavailable); Errors the current cause of those in error or unavailable.
	Streams map[string]string `json:"streams"`
	Errors  map[string]string `json:"errors,omitempty"`
}

// KafkaReadiness is the start-up's connection to Kafka (Readiness.Kafka).
type KafkaReadiness struct {
	OK bool `json:"ok"`
	// Error is why the start-up is still retrying ("" once Kafka answered).
	Error string `json:"error,omitempty"`
}

// Readiness says whether the player is ready and why not.
func (p *Player) Readiness() Readiness {
	r := Readiness{Streams: make(map[string]string, len(p.streamNames))}
	r.Kafka.OK = p.kafkaUp.Load()
	if !r.Kafka.OK {
		if e := p.startErr.Load(); e != nil {
			r.Kafka.Error = *e
		}
	}
	serving, settled := 0, true
	for _, name := range p.streamNames {
		s := p.streams[name]
		s.mu.Lock()
		state, cause := s.stateLocked()
		settled = settled && s.settled
		s.mu.Unlock()
		r.Streams[name] = state
		if cause != "" {
			if r.Errors == nil {
				r.Errors = map[string]string{}
			}
			r.Errors[name] = cause
		}
		if state == StreamReady {
			serving++
		}
	}
	r.Ready = r.Kafka.OK && settled && serving > 0 && p.ctx.Err() == nil
	return r
}

// stateChanged is called after any change of a stream's state (or of the start-up): it
// sets gRPC health to what Readiness says and wakes WaitReady.
func (p *Player) stateChanged() {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if p.Readiness().Ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	if st != p.healthState {
		// After health.Shutdown (Close, the end of Run) these are ignored: NOT_SERVING stays.
		p.health.SetServingStatus("", st)
		p.health.SetServingStatus(statecastv1.Player_ServiceDesc.ServiceName, st)
		p.healthState = st
	}
	close(p.changed)
	p.changed = make(chan struct{})
}
