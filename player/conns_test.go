package player

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// closedWithin reports whether the server closes c within d (a read ends in EOF or a
// reset; whatever the server sends meanwhile — its HTTP/2 settings — is read and dropped).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestUnauthenticatedConnections: connections that never authenticate are bounded — in
// number (max_unauthenticated_connections: one past it is closed at once) and in time
// (auth_timeout: a TLS connection that only answers pings, or only asks for health, is
// closed) — while an authenticated one stays and a legitimate client gets in once the
// idle ones are gone.
func TestUnauthenticatedConnections(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(10, []string{"a"}, 10, newRand(21))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789"})
	reg := prometheus.NewRegistry()
	const authTimeout = 700 * time.Millisecond
	tp := startPlayerTB(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.AuthTimeout = authTimeout
		c.MaxUnauthenticatedConns = 3
		c.MaxConns = 5
	}, WithRegisterer(reg))
	dialTLS := func() (*tls.Conn, error) {
		return tls.Dial("tcp", tp.addr, &tls.Config{RootCAs: sec.pki.Pool, NextProtos: []string{"h2"}})
	}

	// An authenticated client first: it stays past the bound.
	c := newClient("kept", e.chk, "a")
	c.dial = sec.dial("tok-pricing-0123456789", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the client's snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })

	var idle []*tls.Conn
	for range 3 {
		conn, err := dialTLS()
		if err != nil {
			t.Fatalf("an idle connection within the bound: %v", err)
		}
		defer conn.Close()
		idle = append(idle, conn)
	}
	waitFor(t, 5*time.Second, "3 unauthenticated connections", func() bool {
		return gauge(t, reg, "statecast_player_connections", map[string]string{"state": "unauthenticated"}) == 3
	})
	if conn, err := dialTLS(); err == nil {
		if !closedWithin(conn, time.Second) {
			t.Error("a 4th unauthenticated connection (max_unauthenticated_connections 3) stays open")
		}
		conn.Close()
	}
	if v := gauge(t, reg, "statecast_player_connections_refused_total", map[string]string{"reason": "max_unauthenticated"}); v != 1 {
		t.Errorf("connections_refused_total{max_unauthenticated} = %v, want 1", v)
	}
	start := time.Now()
	for i, conn := range idle {
		if !closedWithin(conn, 10*authTimeout) {
			t.Fatalf("idle connection %d is still open %s after it connected (auth_timeout %s)", i, time.Since(start), authTimeout)
		}
	}
	if v := gauge(t, reg, "statecast_player_connections_closed_total", map[string]string{"reason": "auth_timeout"}); v != 3 {
		t.Errorf("connections_closed_total{auth_timeout} = %v, want 3", v)
	}

	// A connection that asks only for health is not authenticated either.
	hconn, err := grpc.NewClient(tp.addr, sec.dial("", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	if _, err := healthpb.NewHealthClient(hconn).Check(hctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health: %v", err)
	}
	waitFor(t, 10*authTimeout, "the health-only connection to be closed", func() bool {
		return gauge(t, reg, "statecast_player_connections_closed_total", map[string]string{"reason": "auth_timeout"}) == 4
	})

	if _, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("new", "a")); err != nil {
		t.Errorf("a client once the idle connections are gone: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the authenticated client's stream ended: %v", err)
	default:
	}
	if v := gauge(t, reg, "statecast_player_connections", map[string]string{"state": "authenticated"}); v < 1 {
		t.Errorf("connections{authenticated} = %v, want the kept client's", v)
	}
	cancel()
	<-done
	e.check()
}

// TestMaxConnections: past max_connections a new connection is closed at once, however it
// would authenticate.
func TestMaxConnections(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	tp := startPlayerTB(t, e, func(c *Config) { c.MaxConns = 2 }, WithRegisterer(reg))
	var conns []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	waitFor(t, 5*time.Second, "2 connections", func() bool {
		return gauge(t, reg, "statecast_player_connections", map[string]string{"state": "unauthenticated"}) == 2
	})
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !closedWithin(conn, 2*time.Second) {
		t.Error("a 3rd connection (max_connections 2) stays open")
	}
	if v := gauge(t, reg, "statecast_player_connections_refused_total", map[string]string{"reason": "max_connections"}); v != 1 {
		t.Errorf("connections_refused_total{max_connections} = %v, want 1", v)
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, 5*time.Second, "the closed connections to be released", func() bool {
		return gauge(t, reg, "statecast_player_connections", map[string]string{"state": "unauthenticated"}) == 0
	})
	if _, err := subscribe(t, tp.addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, helloOf("after", "a")); status.Code(err) == codes.Unavailable {
		t.Errorf("a connection once others closed: %v", err)
	}
}

// TestFailedLogins: a wrong token is refused after auth_failure_delay, counted, logged
// without the token, and its connection is closed; a missing token too.
func TestFailedLogins(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(10, []string{"a"}, 10, newRand(22))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789"})
	reg := prometheus.NewRegistry()
	var logs testenv.LockedBuffer
	const delay = 400 * time.Millisecond
	tp := startPlayerTB(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.AuthFailureDelay = delay
	}, WithRegisterer(reg), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))

	conn, err := grpc.NewClient(tp.addr, sec.dial("tok-guess-0123456789", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_, err = subscribeOn(t, conn, helloOf("g", "a"))
	wantCode(t, "a wrong token", err, codes.Unauthenticated, "not valid")
	if d := time.Since(start); d < delay {
		t.Errorf("a wrong token refused after %s, before auth_failure_delay %s", d, delay)
	}
	waitFor(t, 5*time.Second, "the connection of the failed login to be closed", func() bool {
		return gauge(t, reg, "statecast_player_connections_closed_total", map[string]string{"reason": "auth_failed"}) == 1
	})
	_, err = subscribe(t, tp.addr, sec.dial("", nil), helloOf("n", "a"))
	wantCode(t, "no token", err, codes.Unauthenticated)
	if v := gauge(t, reg, "statecast_player_auth_failures_total", map[string]string{"reason": "bad_token"}); v != 1 {
		t.Errorf("auth_failures_total{bad_token} = %v, want 1", v)
	}
	if v := gauge(t, reg, "statecast_player_auth_failures_total", map[string]string{"reason": "no_credentials"}); v != 1 {
		t.Errorf("auth_failures_total{no_credentials} = %v, want 1", v)
	}
	if !strings.Contains(logs.String(), "authentication failed") || !strings.Contains(logs.String(), `"peer":"127.0.0.1:`) {
		t.Errorf("the failure is not logged with its peer:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "tok-") {
		t.Errorf("a token in the log:\n%s", logs.String())
	}
	if _, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("ok", "a")); err != nil {
		t.Errorf("a good token after the failures: %v", err)
	}

	// Streams opened at once on one connection do not multiply the guesses: a connection
	// not yet authenticated has one authentication in flight, and after a failure the
	// others are refused unchecked.
	many, err := grpc.NewClient(tp.addr, sec.dial("tok-guess-0123456789", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer many.Close()
	const streams = 20
	errs := make(chan error, streams)
	for range streams {
		go func() { _, err := subscribeOn(t, many, helloOf("m", "a")); errs <- err }()
	}
	for range streams {
		wantCode(t, "a stream of the guessing connection", <-errs, codes.Unauthenticated)
	}
	if v := gauge(t, reg, "statecast_player_auth_failures_total", map[string]string{"reason": "bad_token"}); v > 3 {
		t.Errorf("auth_failures_total{bad_token} = %v after %d concurrent guesses on one connection, want each connection to check one", v, streams)
	}
}

// TestServiceLabels: the services clients name get series of their own up to
// max_service_labels; the targets of services first seen past it share the "_other" series.
func TestServiceLabels(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(10, []string{"a"}, 10, newRand(23))
	reg := prometheus.NewRegistry()
	tp := startPlayerTB(t, e, func(c *Config) { c.MaxServiceLabels = 2 }, WithRegisterer(reg))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dones []chan error
	for _, svc := range []string{"svc-a", "svc-b", "svc-c", "svc-d"} {
		c := newClient("i-"+svc, e.chk, "a")
		c.service = svc
		done := make(chan error, 1)
		go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
		dones = append(dones, done)
		waitFor(t, 30*time.Second, svc+"'s snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })
		// One scrape per service, so that the order they are first seen in is theirs.
		_ = gauge(t, reg, "statecast_player_target_lag_entries", nil)
	}
	labels := map[string]bool{}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "statecast_player_target_lag_entries" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "service" {
					labels[l.GetValue()] = true
				}
			}
		}
	}
	if len(labels) != 3 || !labels["svc-a"] || !labels["svc-b"] || !labels["_other"] {
		t.Errorf("service labels %v, want svc-a, svc-b and _other", labels)
	}
	if v := gauge(t, reg, "statecast_player_targets", map[string]string{"service": "_other", "state": "N"}); v != 2 {
		t.Errorf("targets{service=_other,state=N} = %v, want 2", v)
	}
	cancel()
	for _, d := range dones {
		<-d
	}
}

// TestTargetsPerPrincipal: past max_targets_per_principal a principal's next subscription is
// refused with ResourceExhausted naming the bound; another principal still gets in, and the
// principal again once one of its targets ended.
func TestTargetsPerPrincipal(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(10, []string{"a"}, 10, newRand(24))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789", "risk": "tok-risk-0123456789"})
	reg := prometheus.NewRegistry()
	tp := startPlayerTB(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.MaxTargetsPerPrincipal = 2
	}, WithRegisterer(reg))
	var cancels []context.CancelFunc
	var dones []chan error
	for _, id := range []string{"p1", "p2"} {
		c := newClient(id, e.chk, "a")
		c.dial = sec.dial("tok-pricing-0123456789", nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
		waitFor(t, 30*time.Second, id+"'s snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })
		cancels, dones = append(cancels, cancel), append(dones, done)
	}
	_, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("p3", "a"))
	wantCode(t, "a third target of pricing", err, codes.ResourceExhausted, "max_targets_per_principal")
	if v := gauge(t, reg, "statecast_player_principal_limit_refusals_total", map[string]string{"limit": "max_targets_per_principal"}); v != 1 {
		t.Errorf("principal_limit_refusals_total = %v, want 1", v)
	}
	if _, err := subscribe(t, tp.addr, sec.dial("tok-risk-0123456789", nil), helloOf("r1", "a")); err != nil {
		t.Errorf("another principal: %v", err)
	}
	cancels[0]()
	<-dones[0]
	waitFor(t, 10*time.Second, "pricing's third target once one ended", func() bool {
		_, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("p3", "a"))
		return err == nil
	})
	cancels[1]()
	<-dones[1]
}

// TestKafkaRecoverySlots: a principal's recoveries from Kafka wait for one of its
// max_kafka_recoveries_per_principal slots; another principal's do not; a wait ends when
// its target does.
func TestKafkaRecoverySlots(t *testing.T) {
	l := newPrincipalLimits(&Config{MaxTargetsPerPrincipal: 1, MaxKafkaRecoveriesPerPrincipal: 1})
	never := make(chan struct{})
	if ok, waited := l.acquireKafka("pricing", never); !ok || waited {
		t.Fatalf("the first slot: %v %v", ok, waited)
	}
	if ok, _ := l.acquireKafka("risk", never); !ok {
		t.Fatal("another principal's slot")
	}
	got := make(chan bool, 1)
	go func() { ok, waited := l.acquireKafka("pricing", never); got <- ok && waited }()
	select {
	case <-got:
		t.Fatal("a second recovery of pricing did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	if l.kafkaOpen() != 2 || l.kafkaWaiting() != 1 {
		t.Errorf("open %d waiting %d, want 2 and 1", l.kafkaOpen(), l.kafkaWaiting())
	}
	l.releaseKafka("pricing")
	select {
	case ok := <-got:
		if !ok {
			t.Error("the waiting recovery did not get the slot")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting recovery was not woken")
	}
	stop := make(chan struct{})
	go func() { ok, _ := l.acquireKafka("pricing", stop); got <- ok }()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	if ok := <-got; ok {
		t.Error("a wait whose target ended got a slot")
	}
	l.releaseKafka("pricing")
	l.releaseKafka("risk")
	if l.kafkaOpen() != 0 || l.kafkaWaiting() != 0 || len(l.use) != 0 {
		t.Errorf("after every release: open %d waiting %d principals %d", l.kafkaOpen(), l.kafkaWaiting(), len(l.use))
	}
	if !l.acquireTarget("pricing") || l.acquireTarget("pricing") {
		t.Error("max_targets_per_principal 1: the first target refused, or a second admitted")
	}
	l.releaseTarget("pricing")
	if !l.acquireTarget("pricing") {
		t.Error("a target after a release refused")
	}
}

// TestKafkaRecoveriesPerPrincipal: a recovery from Kafka takes one of its principal's slots
// before it opens its consumer — past max_kafka_recoveries_per_principal the next one of
// that principal opens nothing and is counted as waiting, another principal's opens at
// once — and the slot passes on when a recovery ends.
func TestKafkaRecoveriesPerPrincipal(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}},
		Streams: []StreamConfig{{Name: "s", Topic: "t"}}, MaxKafkaRecoveriesPerPrincipal: 1}, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	var opened atomic.Int32
	s.consumerHook = func(sarama.Client) (sarama.Consumer, error) {
		opened.Add(1)
		c := mocks.NewConsumer(t, nil)
		c.ExpectConsumePartition("t", 0, 0) // yields nothing: the recovery reads until it stops
		return c, nil
	}
	type recovery struct {
		tg   *target
		src  *kafkaSource
		done chan error
	}
	start := func(id, principal string) recovery {
		tg := newTarget(s, id, nil, 1, StateRF, 512, 1<<20)
		tg.principal = Principal{Name: principal, Method: "token"}
		r := recovery{tg: tg, src: tg.kafkaSource(1), done: make(chan error, 1)}
		go func() { _, err := r.src.read(0, 10); r.done <- err }()
		return r
	}
	stop := func(r recovery) {
		t.Helper()
		close(r.tg.done)
		if err := <-r.done; !errors.Is(err, errStopped) {
			t.Errorf("%s: read ended with %v, want errStopped", r.tg.id, err)
		}
		r.src.close()
	}
	metric := func(name string) float64 { return gauge(t, reg, name, nil) }

	first := start("pricing-1", "pricing")
	waitFor(t, 5*time.Second, "the first recovery's consumer", func() bool { return opened.Load() == 1 })
	second := start("pricing-2", "pricing")
	waitFor(t, 5*time.Second, "the second recovery of pricing to wait", func() bool {
		return metric("statecast_player_kafka_recoveries_waiting") == 1
	})
	other := start("risk-1", "risk")
	waitFor(t, 5*time.Second, "risk's recovery's consumer", func() bool { return opened.Load() == 2 })
	time.Sleep(100 * time.Millisecond)
	if n := opened.Load(); n != 2 {
		t.Fatalf("%d consumers open, want 2: pricing's second recovery opened one past its bound", n)
	}
	if v := metric("statecast_player_kafka_recoveries"); v != 2 {
		t.Errorf("statecast_player_kafka_recoveries = %v, want 2", v)
	}
	stop(first)
	waitFor(t, 5*time.Second, "pricing's second recovery to get the freed slot", func() bool { return opened.Load() == 3 })
	if v := metric("statecast_player_kafka_recoveries_waiting"); v != 0 {
		t.Errorf("statecast_player_kafka_recoveries_waiting = %v once it opened, want 0", v)
	}
	stop(second)
	stop(other)
	if v := metric("statecast_player_kafka_recoveries"); v != 0 {
		t.Errorf("statecast_player_kafka_recoveries = %v after every recovery ended, want 0", v)
	}
}
