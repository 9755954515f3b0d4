package player

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// secured is a player's security setting in a test: its PKI, the files it serves from
// (copied, so that a test can rotate them) and its tokens file.
type secured struct {
	pki           *testenv.PKI
	cert, key, ca string // the files the player reads
	tokens        string
}

func newSecured(t *testing.T) *secured {
	t.Helper()
	s := &secured{pki: testenv.NewPKI(t)}
	dir := t.TempDir()
	s.cert, s.key, s.ca, s.tokens = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tokens")
	copyFile(t, s.pki.ServerCert, s.cert)
	copyFile(t, s.pki.ServerKey, s.key)
	copyFile(t, s.pki.CAFile, s.ca)
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil { // whole files, as a secret volume swaps them
		t.Fatal(err)
	}
}

// setTokens writes the tokens file: principal -> token.
func (s *secured) setTokens(t *testing.T, tokens map[string]string) {
	t.Helper()
	var b strings.Builder
	for name, tok := range tokens {
		b.WriteString(name + "=" + tok + "\n")
	}
	if err := os.WriteFile(s.tokens+".tmp", []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.tokens+".tmp", s.tokens); err != nil {
		t.Fatal(err)
	}
}

// dial returns the dial options of a client trusting the PKI's CA, with a token (when
// not empty) and a client certificate (when not nil).
func (s *secured) dial(token string, cert *tls.Certificate) []grpc.DialOption {
	tc := &tls.Config{RootCAs: s.pki.Pool}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// subscribe runs one Subscribe until the snapshot ends (or the stream fails) and returns
// the views of the rows it got.
func subscribe(t *testing.T, addr string, opts []grpc.DialOption, h *statecastv1.Hello) (views []string, err error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return subscribeOn(t, conn, h)
}

// subscribeOn is subscribe on a connection of the caller's.
func subscribeOn(t *testing.T, conn *grpc.ClientConn, h *statecastv1.Hello) (views []string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: h}}); err != nil {
		_, err = st.Recv() // the stream's status (Send reports only io.EOF)
		return nil, err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return views, err
		}
		for _, e := range m.GetBatch().GetEntries() {
			if e.GetView() != "" && !slices.Contains(views, e.GetView()) {
				views = append(views, e.GetView())
			}
		}
		if m.GetSnapshotEnd() != nil {
			return views, nil
		}
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, contains ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
		return
	}
	for _, c := range contains {
		if !strings.Contains(status.Convert(err).Message(), c) {
			t.Errorf("%s: %q does not say %q", what, status.Convert(err).Message(), c)
		}
	}
}

func helloOf(id string, views ...string) *statecastv1.Hello {
	return &statecastv1.Hello{ClientId: id, Service: "svc", Stream: "s", Views: views}
}

// TestTLSAndTokens: a player with TLS and tokens refuses plaintext, a missing token, a
// wrong one, and a token removed from its file once the file is read again; a good token
// subscribes. Health answers without a token; reflection is off.
func TestTLSAndTokens(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(40, []string{"a"}, 10, newRand(7))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789", "risk": "tok-risk-0123456789"})
	tp := startPlayer(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.ReloadInterval = 20 * time.Millisecond
	})

	if _, err := subscribe(t, tp.addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, helloOf("p", "a")); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want Unavailable", err)
	}
	_, err := subscribe(t, tp.addr, sec.dial("", nil), helloOf("a", "a"))
	wantCode(t, "no token", err, codes.Unauthenticated, "bearer token is required")
	_, err = subscribe(t, tp.addr, sec.dial("tok-pricing-wrong", nil), helloOf("a", "a"))
	wantCode(t, "wrong token", err, codes.Unauthenticated, "not valid")
	if strings.Contains(err.Error(), "tok-pricing") {
		t.Errorf("the refusal repeats the token: %v", err)
	}
	views, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("a", "a"))
	if err != nil || !slices.Equal(views, []string{"a"}) {
		t.Fatalf("good token: %v %v", views, err)
	}

	// The health service answers every peer (probes carry no token).
	conn, err := grpc.NewClient(tp.addr, sec.dial("", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a token: %v %v", hc, err)
	}
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		_ = rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = rc.Recv()
	}
	wantCode(t, "reflection (off by default)", err, codes.Unimplemented)

	// A client that stays connected while its token is revoked, and a reconnect with it.
	c := newClient("kept", e.chk, "a")
	c.dial = sec.dial("tok-risk-0123456789", nil)
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.session(sctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the connected client's snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789"})
	waitFor(t, 10*time.Second, "the revocation", func() bool {
		_, err := subscribe(t, tp.addr, sec.dial("tok-risk-0123456789", nil), helloOf("r", "a"))
		return status.Code(err) == codes.Unauthenticated
	})
	if _, err := subscribe(t, tp.addr, sec.dial("tok-pricing-0123456789", nil), helloOf("a2", "a")); err != nil {
		t.Errorf("a token kept in the file stopped working: %v", err)
	}
	// A subscription already running under the revoked token ends too.
	defer scancel()
	select {
	case err := <-done:
		wantCode(t, "the subscription running under the revoked token", err, codes.Unauthenticated, "revoked")
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription running under the revoked token is still open")
	}
	e.check()
}

// TestTokensFileRefused: a tokens file with a malformed line is refused loudly — /readyz
// fails naming the tokens, statecast_player_tokens_file_refused is 1 — and a running
// subscription whose token is no longer on a well-formed line ends, while one whose token
// still is goes on; a good file clears both signals.
func TestTokensFileRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(20, []string{"a"}, 10, newRand(17))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789", "risk": "tok-risk-0123456789"})
	reg := prometheus.NewRegistry()
	tp := startPlayerTB(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.ReloadInterval = 20 * time.Millisecond
	}, WithRegisterer(reg))
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		tp.p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := ready(); code != 200 || gauge(t, reg, "statecast_player_tokens_file_refused", map[string]string{"field": "tokens"}) != 0 {
		t.Fatalf("a good file: readyz %d %s, refused %v", code, body, gauge(t, reg, "statecast_player_tokens_file_refused", nil))
	}
	run := func(id, tok string, chk *checker.Checker) (*client, chan error, context.CancelFunc) {
		c := newClient(id, chk, "a")
		c.dial = sec.dial(tok, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
		waitFor(t, 30*time.Second, id+"'s snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })
		return c, done, cancel
	}
	pricing, pricingDone, cancelPricing := run("pricing-1", "tok-pricing-0123456789", e.chk)
	defer cancelPricing()
	_, riskDone, cancelRisk := run("risk-1", "tok-risk-0123456789", nopChecker()) // it ends mid-stream
	defer cancelRisk()

	if err := os.WriteFile(sec.tokens, []byte("pricing=tok-pricing-0123456789\nrisk tok-risk-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-riskDone:
		wantCode(t, "risk, its line malformed", err, codes.Unauthenticated, "revoked")
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription whose line is malformed is still open")
	}
	waitFor(t, 10*time.Second, "readyz to fail", func() bool { code, body := ready(); return code == 503 && strings.Contains(body, `"tokens"`) })
	if v := gauge(t, reg, "statecast_player_tokens_file_refused", map[string]string{"field": "tokens"}); v != 1 {
		t.Errorf("statecast_player_tokens_file_refused = %v, want 1", v)
	}
	if _, body := ready(); strings.Contains(body, "tok-") {
		t.Errorf("readyz shows a token: %s", body)
	}
	last := e.produce(5, []string{"a"}, 10, newRand(18))
	waitFor(t, 30*time.Second, "pricing, still listed, to get new entries", func() bool { return pricing.Applied() >= last })

	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789"})
	waitFor(t, 10*time.Second, "readyz after a good file", func() bool { code, _ := ready(); return code == 200 })
	if v := gauge(t, reg, "statecast_player_tokens_file_refused", map[string]string{"field": "tokens"}); v != 0 {
		t.Errorf("statecast_player_tokens_file_refused = %v after a good file, want 0", v)
	}
	cancelPricing()
	if err := <-pricingDone; err != nil {
		t.Errorf("pricing's session: %v", err)
	}
	e.check()
}

// TestMutualTLS: with client_ca_file, a client needs a certificate of that CA; a
// certificate from another CA is refused in the handshake, none at all too; the principal
// is the certificate's URI SAN, else its CN, and the grants apply to it.
func TestMutualTLS(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(40, []string{"a", "b"}, 10, newRand(9))
	sec := newSecured(t)
	tp := startPlayer(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key, ClientCAFile: sec.ca}
		c.Access = []Grant{
			{Principals: []string{"pricing"}, Streams: []string{"s"}, Views: []string{"a"}},
			{Principals: []string{"spiffe://test/ns/*/sa/risk"}, Streams: []string{"*"}, Views: []string{"*"}},
		}
	})
	pricing := sec.pki.ClientCertificate(t, "pricing")
	if views, err := subscribe(t, tp.addr, sec.dial("", &pricing), helloOf("m1", "a")); err != nil || !slices.Equal(views, []string{"a"}) {
		t.Fatalf("a certificate of the CA: %v %v", views, err)
	}
	_, err := subscribe(t, tp.addr, sec.dial("", &pricing), helloOf("m2", "b"))
	wantCode(t, "pricing reading b", err, codes.PermissionDenied, `"pricing"`, `view "b"`)
	risk := sec.pki.ClientCertificate(t, "ignored-cn", "spiffe://test/ns/prod/sa/risk")
	if views, err := subscribe(t, tp.addr, sec.dial("", &risk), helloOf("m3")); err != nil || len(views) != 2 {
		t.Fatalf("the URI SAN principal, every view: %v %v", views, err)
	}

	foreign := testenv.NewPKI(t).ClientCertificate(t, "pricing")
	_, err = subscribe(t, tp.addr, sec.dial("", &foreign), helloOf("f", "a"))
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("a certificate of another CA: %v, want the handshake refused (Unavailable)", err)
	}
	_, err = subscribe(t, tp.addr, sec.dial("", nil), helloOf("n", "a"))
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("no client certificate: %v, want the handshake refused (Unavailable)", err)
	}
}

// TestAccess: grants by principal, stream and view pattern: a granted view (by name and
// by pattern) is served and the snapshot holds its rows only; a view, every view or a
// stream outside the grant is refused with PermissionDenied naming it; a view the stream
// does not carry is NotFound, also when a pattern grants it.
func TestAccess(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(60, []string{"events", "markets", "secret"}, 10, newRand(10))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789", "ops-1": "tok-ops-0123456789", "other": "tok-other-0123456789"})
	tp := startPlayer(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.Access = []Grant{
			{Principals: []string{"pricing"}, Streams: []string{"s"}, Views: []string{"events", "mark*"}},
			{Principals: []string{"ops-*"}, Streams: []string{"*"}, Views: []string{"*"}},
		}
	})
	pricing, ops, other := sec.dial("tok-pricing-0123456789", nil), sec.dial("tok-ops-0123456789", nil), sec.dial("tok-other-0123456789", nil)
	views, err := subscribe(t, tp.addr, pricing, helloOf("p1", "events", "markets"))
	slices.Sort(views)
	if err != nil || !slices.Equal(views, []string{"events", "markets"}) {
		t.Fatalf("granted views: %v %v", views, err)
	}
	_, err = subscribe(t, tp.addr, pricing, helloOf("p2", "events", "secret"))
	wantCode(t, "a view outside the grant", err, codes.PermissionDenied, `view "secret"`)
	_, err = subscribe(t, tp.addr, pricing, helloOf("p3"))
	wantCode(t, "every view", err, codes.PermissionDenied, "every view", "events")
	_, err = subscribe(t, tp.addr, pricing, helloOf("p4", "markz"))
	wantCode(t, "a granted pattern, a view the stream does not carry", err, codes.NotFound, `"markz"`)
	_, err = subscribe(t, tp.addr, other, helloOf("o1", "events"))
	wantCode(t, "a principal without a grant", err, codes.PermissionDenied, `"other"`, `stream "s"`)
	h := helloOf("o2", "events")
	h.Stream = "nope"
	_, err = subscribe(t, tp.addr, pricing, h)
	wantCode(t, "a stream outside the grant (unknown too)", err, codes.PermissionDenied, `stream "nope"`)
	_, err = subscribe(t, tp.addr, ops, h)
	wantCode(t, "an unknown stream, granted", err, codes.NotFound)
	views, err = subscribe(t, tp.addr, ops, helloOf("x1"))
	if err != nil || len(views) != 3 {
		t.Fatalf("every view under a * grant: %v %v", views, err)
	}

	// Live entries and progress messages: a target of events only never sees another view.
	c := newClient("live", e.chk, "events")
	c.dial = pricing
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })
	last := e.produce(60, []string{"events", "secret"}, 10, newRand(11))
	waitFor(t, 30*time.Second, "the live entries", func() bool { return c.Applied() >= last })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.check() // the checker knows the target's views: an entry of another view is a violation
}

// TestIdentity: two replicas of one service (one principal, two instance ids) stay
// connected side by side; a reconnect of the same instance replaces its old target
// (logged, counted); the same instance id under another principal replaces nothing. The
// per-target metrics are the service's, not the instances'.
func TestIdentity(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(20, []string{"a"}, 10, newRand(12))
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"pricing": "tok-pricing-0123456789", "intruder": "tok-intruder-0123456789"})
	var logs testenv.LockedBuffer
	reg := prometheus.NewRegistry()
	tp := startPlayerTB(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
	}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithRegisterer(reg))
	type running struct {
		stop func() error
		done chan error
	}
	run := func(c *client) running {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
		return running{done: done, stop: func() error { cancel(); return <-done }}
	}
	replica := func(id string, token string) *client {
		c := newClient(id, e.chk, "a")
		c.service, c.dial = "pricing-svc", sec.dial(token, nil)
		return c
	}
	r1, r2 := replica("pricing-7d9f/1", "tok-pricing-0123456789"), replica("pricing-7d9f/2", "tok-pricing-0123456789")
	run1, run2 := run(r1), run(r2)
	defer func() { _ = run2.stop() }()
	last := e.produce(30, []string{"a"}, 10, newRand(13))
	for _, c := range []*client{r1, r2} {
		waitFor(t, 30*time.Second, c.id+" to get every entry", func() bool { return c.Applied() >= last })
	}
	st := tp.p.Status().Streams[0].Targets
	if len(st) != 2 || st[0].Service != "pricing-svc" || st[0].Principal != "pricing" || st[0].ID == st[1].ID {
		t.Fatalf("two replicas: %+v", st)
	}
	if n := gauge(t, reg, "statecast_player_replacements_total", nil); n > 0 {
		t.Fatalf("replacements %v with two replicas", n)
	}
	if got := series(t, reg, "statecast_player_targets"); got != 4 {
		t.Errorf("statecast_player_targets: %d series, want the service's 4 states", got)
	}
	if v := gauge(t, reg, "statecast_player_targets", map[string]string{"service": "pricing-svc", "state": "N"}); v != 2 {
		t.Errorf("targets of pricing-svc in N: %v", v)
	}

	// Another principal presenting r1's instance id: its own target, r1 untouched. (Its
	// deliveries are checked apart: the checker knows targets by id.)
	intruder := replica("pricing-7d9f/1", "tok-intruder-0123456789")
	intruder.chk = nopChecker()
	runI := run(intruder)
	waitFor(t, 30*time.Second, "the intruder's own target", func() bool { return len(tp.p.Status().Streams[0].Targets) == 3 })
	last = e.produce(10, []string{"a"}, 10, newRand(14))
	for _, c := range []*client{r1, r2, intruder} {
		waitFor(t, 30*time.Second, c.id+" to get the new entries", func() bool { return c.Applied() >= last })
	}
	if n := gauge(t, reg, "statecast_player_replacements_total", nil); n > 0 {
		t.Fatalf("another principal replaced a target (%v)", n)
	}
	if err := runI.stop(); err != nil {
		t.Fatal(err)
	}

	// The same instance reconnecting (its connection was lost, say): it replaces r1.
	again := replica("pricing-7d9f/1", "tok-pricing-0123456789")
	again.chk = nopChecker()
	runA := run(again)
	defer func() { _ = runA.stop() }()
	select {
	case err := <-run1.done:
		wantCode(t, "the replaced connection", err, codes.Aborted, "replaced by a new connection of the same instance")
	case <-time.After(30 * time.Second):
		t.Fatal("the old connection of the instance was not replaced")
	}
	waitFor(t, 10*time.Second, "the replacement to be counted", func() bool {
		return gauge(t, reg, "statecast_player_replacements_total", map[string]string{"stream": "s"}) == 1
	})
	if !poll(10*time.Second, func() bool {
		return strings.Contains(logs.String(), "target replaced by a new connection of the same instance") && strings.Contains(logs.String(), "pricing-7d9f/1")
	}) {
		t.Errorf("the replacement is not logged:\n%s", logs.String())
	}
	e.check()
}

// gauge is the value of the series of metric name whose labels include want (-1: none).
func gauge(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// series counts the series of metric name.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// TestCertRotation: the server certificate's files are replaced while a client is
// connected: it stays connected and keeps receiving; new connections get the new
// certificate; a rotation caught half-way (new certificate, old key) changes nothing.
func TestCertRotation(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(20, []string{"a"}, 10, newRand(15))
	sec := newSecured(t)
	tp := startPlayer(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.ReloadInterval = 20 * time.Millisecond
	})
	served := func() []byte {
		t.Helper()
		conn, err := grpc.NewClient(tp.addr, sec.dial("", nil)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var p peer.Peer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
			t.Fatal(err)
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].Raw
	}
	first := served()
	c := newClient("steady", e.chk, "a")
	c.dial = sec.dial("", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the snapshot", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.hasState })

	newCert, newKey := sec.pki.ServerFiles(t)
	copyFile(t, newCert, sec.cert) // half-way: the key does not match yet
	time.Sleep(200 * time.Millisecond)
	if !bytes.Equal(served(), first) {
		t.Fatal("a half-done rotation changed the served certificate")
	}
	copyFile(t, newKey, sec.key)
	waitFor(t, 10*time.Second, "the new certificate", func() bool { return !bytes.Equal(served(), first) })
	if got := served(); !certIs(t, got, newCert) {
		t.Fatal("the served certificate is not the new one")
	}
	last := e.produce(30, []string{"a"}, 10, newRand(16))
	waitFor(t, 30*time.Second, "the connected client to keep receiving", func() bool { return c.Applied() >= last })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the connected client: %v", err)
	}
	// It reconnects cleanly, resuming where it stopped, on the new certificate.
	last = e.produce(10, []string{"a"}, 10, newRand(17))
	sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= last })
	e.check()
}

// certIs reports whether der is the certificate in the PEM file.
func certIs(t *testing.T, der []byte, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	return blk != nil && bytes.Equal(blk.Bytes, der)
}

// TestReflectionAuthenticated: reflection, when enabled, needs credentials like
// Subscribe.
func TestReflectionAuthenticated(t *testing.T) {
	e := newEnv(t, nil)
	sec := newSecured(t)
	sec.setTokens(t, map[string]string{"ops": "tok-ops-0123456789"})
	tp := startPlayer(t, e, func(c *Config) {
		c.Insecure = false
		c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key}
		c.Tokens = TokensConfig{File: sec.tokens}
		c.Reflection = true
	})
	list := func(token string) error {
		conn, err := grpc.NewClient(tp.addr, sec.dial(token, nil)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			return err
		}
		_, err = rc.Recv()
		return err
	}
	wantCode(t, "reflection without a token", list(""), codes.Unauthenticated)
	if err := list("tok-ops-0123456789"); err != nil {
		t.Errorf("reflection with a token: %v", err)
	}
}

// TestSecurityConfig: the security settings are checked at New, naming the field.
func TestSecurityConfig(t *testing.T) {
	sec := newSecured(t)
	base := func() Config {
		return Config{Kafka: kafkaconn.Config{Brokers: []string{"k:9092"}}, Streams: []StreamConfig{{Name: "s"}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"neither tls nor insecure", func(c *Config) {}, "tls.cert_file: required, or insecure: true"},
		{"both", func(c *Config) { c.Insecure = true; c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key} }, "insecure: true and tls"},
		{"key without cert", func(c *Config) { c.TLS = TLSConfig{KeyFile: sec.key} }, "tls.cert_file: required with tls.key_file"},
		{"client ca without tls", func(c *Config) { c.Insecure = true; c.TLS = TLSConfig{ClientCAFile: sec.ca} }, "tls.client_ca_file"},
		{"missing cert file", func(c *Config) { c.TLS = TLSConfig{CertFile: sec.cert + ".nope", KeyFile: sec.key} }, "tls.cert_file"},
		{"missing tokens file", func(c *Config) { c.Insecure = true; c.Tokens = TokensConfig{File: sec.tokens + ".nope"} }, "tokens.file"},
		{"public admin without tokens", func(c *Config) { c.Insecure = true; c.Admin = AdminConfig{Addr: ":7072"} }, "admin.addr"},
		{"bad grant", func(c *Config) {
			c.Insecure = true
			c.Access = []Grant{{Principals: []string{"a"}, Streams: []string{"["}}}
		}, "access[0].streams: bad pattern"},
		{"empty grant views", func(c *Config) {
			c.Insecure = true
			c.Access = []Grant{{Principals: []string{"a"}, Streams: []string{"*"}}}
		}, "access[0].views"},
		{"bad declared view", func(c *Config) { c.Insecure = true; c.Streams[0].Views = []string{"["} }, "views: bad pattern"},
		{"kafka sasl", func(c *Config) { c.Insecure = true; c.Kafka.SASL.Mechanism = "PLAIN" }, "kafka.sasl.user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			_, err := New(c)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	c := base()
	c.Kafka.Brokers = []string{"k:9092"}
	c.TLS = TLSConfig{CertFile: sec.cert, KeyFile: sec.key, ClientCAFile: sec.ca}
	p, err := New(c)
	if err != nil {
		t.Fatalf("TLS with client CAs: %v", err)
	}
	_ = p.Close()
}

// TestKafkaSecured: the player reads its stream through each of the real broker's secured
// listeners, SASL_SSL and mutual TLS — main fetcher, admissions' offset look-ups and
// recoveries from Kafka alike.
func TestKafkaSecured(t *testing.T) {
	for _, l := range testenv.KafkaSecured(t) {
		t.Run(l.Name, func(t *testing.T) { testKafkaSecured(t, l.Conn) })
	}
}

func testKafkaSecured(t *testing.T, conn kafkaconn.Config) {
	e := newEnv(t, nil)
	e.produce(50, []string{"a", "b"}, 10, newRand(18))
	tp := startPlayer(t, e, func(c *Config) {
		c.Kafka = conn
		c.Kafka.ClientID = "player-secured-test"
		c.HistoryBytes = 1 // recoveries read Kafka
	})
	c := newClient("secured", e.chk, "a", "b")
	last := e.lastOffset()
	sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= last })
	last = e.produce(50, []string{"a", "b"}, 10, newRand(19))
	sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= last }) // a recovery from its index
	e.check()
}

// TestAdminAuthFailures: requests the admin endpoint refuses for their token are counted
// in statecast_player_admin_auth_failures_total.
func TestAdminAuthFailures(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("ops=tok-admin-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s", Topic: "t"}},
		Admin: AdminConfig{Addr: "127.0.0.1:7072", Tokens: TokensConfig{File: tokens}}}, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := p.admin.Guard(p.AdminHandler())
	for tok, want := range map[string]int{"": 401, "tok-guess-0123456789": 401, "tok-admin-0123456789": 200} {
		req := httptest.NewRequest("GET", "/status.json", nil)
		req.Host = "127.0.0.1:7072"
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("token %q: %d, want %d", tok, rec.Code, want)
		}
	}
	if v := gauge(t, reg, "statecast_player_admin_auth_failures_total", nil); v != 2 {
		t.Errorf("statecast_player_admin_auth_failures_total = %v, want 2", v)
	}
}
