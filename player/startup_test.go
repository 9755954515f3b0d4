package player

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestStartupWaitsForKafka: a player started while its (dedicated) broker is down serves
// /livez at once, answers /readyz 503 with why, logs each retry as the distributor does,
// and serves once the broker is up, within startup_timeout.
func TestStartupWaitsForKafka(t *testing.T) {
	k := testenv.DedicatedKafka(t)
	e := newEnvOn(t, k.Brokers)
	e.produce(40, []string{"a", "b"}, 20, newRand(31))
	k.Kill(t)

	var logs testenv.LockedBuffer
	cfg := Config{Insecure: true, HTTPAddr: testenv.FreeAddr(t), Kafka: kafkaconn.Config{Brokers: k.Brokers, Timeout: 2 * time.Second},
		Streams: []StreamConfig{{Name: "s", Topic: e.topic}}, StartupTimeout: 3 * time.Minute, ShutdownGrace: 2 * time.Second,
		ProgressInterval: 50 * time.Millisecond}
	p, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(lis) }()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("player log:\n%s", logs.String())
		}
	})

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + cfg.HTTPAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, 30*time.Second, "/livez while Kafka is down", func() bool { code, _ := get("/livez"); return code == 200 })
	waitFor(t, 30*time.Second, "a start-up retry logged", func() bool {
		return strings.Contains(logs.String(), `"msg":"start-up: Kafka does not answer; retrying"`)
	})
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"kafka":{"ok":false,"error":"`) || !strings.Contains(body, `"s":"starting"`) {
		t.Errorf("/readyz while Kafka is down: %d %s", code, body)
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended while Kafka was down: %v", err)
	default:
	}

	k.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady after the broker started: %v", err)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"kafka":{"ok":true}`) {
		t.Errorf("/readyz once Kafka answers: %d %s", code, body)
	}
	if !strings.Contains(logs.String(), `"msg":"start-up: Kafka answers"`) {
		t.Errorf("no start-up: Kafka answers line")
	}
	c := newClient("c", e.chk)
	sessionUntil(t, c, lis.Addr().String(), 30*time.Second, func() bool { return c.Applied() >= e.lastOffset() })
	e.check()
}

// TestStartupTimeout: Run gives up when Kafka does not answer within startup_timeout, with
// ErrKafkaUnreachable naming the brokers and the timeout.
func TestStartupTimeout(t *testing.T) {
	nobody := testenv.FreeAddr(t) // nothing listens there
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{nobody}, Timeout: time.Second},
		Streams: []StreamConfig{{Name: "s"}}, StartupTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	err = p.Run(ctx)
	if !errors.Is(err, ErrKafkaUnreachable) || !strings.Contains(err.Error(), nobody) || !strings.Contains(err.Error(), "startup_timeout (2s)") {
		t.Fatalf("Run = %v, want ErrKafkaUnreachable naming %s and startup_timeout", err, nobody)
	}
	if took := time.Since(began); took < 2*time.Second || took > 30*time.Second {
		t.Errorf("Run gave up after %s, want about startup_timeout", took)
	}
}

// TestRefusedByKafka: the errors a start-up does not retry are found however sarama wraps
// them (a broker's KError inside the out-of-brokers error: sarama.Wrap), and a broker that
// is not up yet is not one of them.
func TestRefusedByKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"SASL authentication failed", sarama.Wrap(sarama.ErrOutOfBrokers,
			sarama.Wrap(sarama.ErrSASLAuthenticationFailed, errors.New("invalid credentials"))), true},
		{"bad certificate", sarama.Wrap(sarama.ErrOutOfBrokers, x509.UnknownAuthorityError{}), true},
		{"TLS alert", sarama.Wrap(sarama.ErrOutOfBrokers, &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}), true},
		{"connection refused", sarama.Wrap(sarama.ErrOutOfBrokers, &net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}), false},
		{"out of brokers", sarama.ErrOutOfBrokers, false},
	} {
		if got := refusedByKafka(tc.err); got != tc.want {
			t.Errorf("%s (%v): refused %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
