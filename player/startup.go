package player

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/backoff"
)

// connectKafka opens every stream's Kafka clients (stream.openClients). While Kafka does
// not answer it retries with backoff (up to 800ms, doubling up to 30s, jittered) for Config.StartupTimeout,
// as the distributor's start-up does — a broker that starts after the player, as in a
// compose file or a fresh cluster, is waited for — then fails with ErrKafkaUnreachable
// naming the brokers. A refusal (a broker certificate that does not verify, a TLS alert,
// SASL authentication failed) fails at once: retrying does not change it. It returns nil
// when ctx ends first.
func (p *Player) connectKafka(ctx context.Context) error {
	brokers := strings.Join(p.cfg.Kafka.Brokers, ",")
	deadline := time.Now().Add(p.cfg.StartupTimeout)
	for attempt := 0; ; attempt++ {
		err := p.probeKafka()
		if err == nil {
			err = p.openClients()
		}
		if err == nil {
			if attempt > 0 {
				p.log.Info("start-up: Kafka answers", "brokers", brokers, "attempts", attempt+1)
			}
			p.kafkaUp.Store(true)
			p.stateChanged()
			return nil
		}
		msg := err.Error()
		p.startErr.Store(&msg)
		if ctx.Err() != nil {
			return nil
		}
		if refusedByKafka(err) {
			return fmt.Errorf("%w: brokers %s refused the connection: %w (a refusal: not retried)", ErrKafkaUnreachable, brokers, err)
		}
		wait := startupRetry.Delay(attempt + 3) // at most 800ms first, doubling up to 30s, jittered
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: brokers %s did not answer within startup_timeout (%s): %w", ErrKafkaUnreachable, brokers, p.cfg.StartupTimeout, err)
		}
		wait = min(wait, left)
		p.log.Warn("start-up: Kafka does not answer; retrying", "brokers", brokers, "err", err, "attempt", attempt+1, "retry_in", wait,
			"gives_up_in", left.Round(time.Second))
		if !sleepCtx(ctx, wait) {
			return nil
		}
	}
}

// probeKafka asks the brokers for the cluster's metadata once each: a try of
// connectKafka, as long as one pass over the brokers (the clients' own retries of a
// metadata request would make one try outlast StartupTimeout).
func (p *Player) probeKafka() error {
	conn := p.cfg.kafka()
	kc := conn.SaramaConfig()
	kc.Metadata.Retry.Max = 0
	c, err := sarama.NewClient(p.cfg.Kafka.Brokers, kc)
	if err != nil {
		return err
	}
	return c.Close()
}

// openClients opens the clients of every stream that has none yet.
func (p *Player) openClients() error {
	for _, name := range p.streamNames {
		if err := p.streams[name].openClients(); err != nil {
			return err
		}
	}
	return nil
}

// refusedByKafka reports whether err is a refusal that retrying does not change: the
// broker's certificate does not verify, the broker refused ours (a TLS alert), or SASL
// authentication failed. Anything else (a broker not up yet, a connection reset) is
// retried. (The distributor's start-up tells them apart by the same errors.)
func refusedByKafka(err error) bool {
	// errors.Is, not errors.As: sarama wraps the broker's KError as the sentinel of an
	// error whose Unwrap skips it (sarama.Wrap), which only its Is method reaches.
	for _, kerr := range []sarama.KError{sarama.ErrSASLAuthenticationFailed, sarama.ErrUnsupportedSASLMechanism,
		sarama.ErrIllegalSASLState, sarama.ErrClusterAuthorizationFailed, sarama.ErrTopicAuthorizationFailed} {
		if errors.Is(err, kerr) {
			return true
		}
	}
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	return errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &host) || errors.As(err, &verify) ||
		(errors.As(err, &op) && op.Op == "remote error") // a TLS alert from the broker
}

// startupRetry is the wait between tries to reach Kafka at start-up (the distributor's
// bounds: from 100ms doubling to 30s; the first try waits up to 800ms).
var startupRetry = backoff.Policy{Min: 100 * time.Millisecond, Max: 30 * time.Second}
