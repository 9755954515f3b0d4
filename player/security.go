package player

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/statecast/statecast/internal/daemon"
)

// TLSConfig names the PEM files of the gRPC server's TLS (Config.TLS), read again when they
// change (every Config.ReloadInterval, compared by content), so a rotated certificate needs
// no restart. The distributor's TLSConfig has the same fields.
type TLSConfig struct {
	// CertFile and KeyFile are the server's certificate chain and its key (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, for mutual TLS: a client must present a certificate signed by one of
	// these CAs (or, when Config.Tokens is set too, a token instead). Not supported on the
	// admin endpoint (AdminConfig.TLS).
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether a certificate is configured.
func (t TLSConfig) Enabled() bool { return t.server().Enabled() }

// server is t as the daemon plumbing loads it.
func (t TLSConfig) server() daemon.ServerTLS { return daemon.ServerTLS(t) }

// TokensConfig says where bearer tokens are (Config.Tokens, AdminConfig.Tokens): a file,
// an environment variable, or both (their tokens are merged). Each holds name=token
// entries, one a line (the variable may also separate them with commas; # starts a comment
// line); a token may be given as sha256:<hex> of itself, so that the file need not hold the
// token. The name is the principal the token authenticates; one name may have several
// tokens (the old and the new one during a rotation). The file is read again when it
// changes, so a token is revoked by removing its line; the variable only at start. The
// distributor's TokensConfig has the same fields.
type TokensConfig struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

// Enabled reports whether tokens are configured.
func (t TokensConfig) Enabled() bool { return t.tokens().Enabled() }

// tokens is t as the daemon plumbing loads it.
func (t TokensConfig) tokens() daemon.Tokens { return daemon.Tokens(t) }

// AdminConfig is the admin HTTP endpoint (Config.Admin): the status pages, which show
// client identities. The distributor's AdminConfig has the same fields.
type AdminConfig struct {
	// Addr is where it listens (default DefaultAdminAddr in a file; empty: not served).
	Addr string `yaml:"addr"`
	// Tokens, when set, are required on every request (Authorization: Bearer); required
	// when Addr is not a loopback address.
	Tokens TokensConfig `yaml:"tokens"`
	// TLS serves the endpoint over HTTPS (CertFile, KeyFile; ClientCAFile is refused);
	// required with Tokens when Addr is not a loopback address, unless Insecure.
	TLS TLSConfig `yaml:"tls"`
	// Insecure accepts Tokens over plaintext HTTP beyond loopback: only on a network whose
	// every hop is trusted (containers publishing the endpoint on their host's loopback).
	Insecure bool `yaml:"insecure"`
}

// admin is a as the daemon plumbing checks and loads it.
func (a AdminConfig) admin() daemon.Admin {
	return daemon.Admin{Addr: a.Addr, Tokens: a.Tokens.tokens(), TLS: a.TLS.server(), Insecure: a.Insecure}
}

// Principal is who a target is: the name of its bearer token, or the identity of its
// client certificate (its first URI SAN, else its subject CN, else its first DNS SAN).
// Anonymous is the empty name, the principal of every client of a player without
// authentication (insecure: true and no tokens).
type Principal struct {
	Name string
	// Method is how it was authenticated: "token", "certificate" or "none".
	Method string
}

func (p Principal) String() string {
	if p.Name == "" {
		return "anonymous"
	}
	return p.Name
}

type principalKey struct{}

// principalFrom returns the principal the interceptor put in ctx (anonymous when none).
func principalFrom(ctx context.Context) Principal {
	p, ok := ctx.Value(principalKey{}).(Principal)
	if !ok {
		return Principal{Method: "none"}
	}
	return p
}

// auth authenticates the calls of the gRPC server: it holds the player's tokens (nil:
// none) and knows whether client certificates are verified.
type auth struct {
	tokens *daemon.TokenSet
	mtls   bool
	// open: no authentication at all (insecure, no tokens, no client CA): every call is
	// anonymous.
	open bool
	log  *slog.Logger
	// conns are the connections of Serve's listeners: a call's first authentication marks
	// its connection, a failure closes it.
	conns *connTracker
	// failDelay: a failed authentication is answered after it (Config.AuthFailureDelay);
	// done ends the wait (the player closes).
	failDelay time.Duration
	done      <-chan struct{}
	failures  *prometheus.CounterVec // by reason
	failLog   logLimiter

	mu sync.Mutex
	// live are the streams running under a token, checked again at each change of the
	// tokens file: a stream whose token was revoked is ended (revokeStale).
	live map[*tokenStream]struct{}
}

// tokenStream is a stream authenticated by a token: the token's hash (never the token),
// the name it authenticated, and how to end the stream.
type tokenStream struct {
	hash   [sha256.Size]byte
	name   string
	method string
	end    context.CancelCauseFunc
}

// authFailure is a failed authentication: the refusal sent to the client, and its reason
// in statecast_player_auth_failures_total.
type authFailure struct {
	reason string
	err    error
}

func (f *authFailure) Error() string { return f.err.Error() }
func (f *authFailure) Unwrap() error { return f.err }

// Reasons of statecast_player_auth_failures_total.
const (
	failBadToken      = "bad_token"
	failNoCredentials = "no_credentials"
	failNoIdentity    = "certificate_without_identity"
)

func refuse(reason, format string, a ...any) error {
	return &authFailure{reason: reason, err: fmt.Errorf("%w: "+format, append([]any{ErrUnauthenticated}, a...)...)}
}

// errRevoked ends a stream whose token was revoked while it ran.
var errRevoked = fmt.Errorf("%w: the bearer token was revoked", ErrUnauthenticated)

// authenticate returns the principal of a call: its bearer token's name when it sends
// one (a wrong token is refused even when the certificate is good), else its verified
// client certificate's identity; and, for a token, its hash (nil otherwise). Errors never
// contain the token.
func (a *auth) authenticate(ctx context.Context) (Principal, *[sha256.Size]byte, error) {
	if a.open {
		return Principal{Method: "none"}, nil, nil
	}
	if a.tokens != nil {
		var tok string
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			for _, v := range md.Get("authorization") {
				if tok = daemon.BearerToken(v); tok != "" {
					break
				}
			}
		}
		if tok != "" {
			h := sha256.Sum256([]byte(tok))
			name, ok := a.tokens.LookupHash(h)
			if !ok {
				return Principal{}, nil, refuse(failBadToken, "the bearer token is not valid")
			}
			return Principal{Name: name, Method: "token"}, &h, nil
		}
	}
	if a.mtls {
		if pr, ok := peer.FromContext(ctx); ok {
			if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
				if name := certPrincipal(ti.State.VerifiedChains[0][0]); name != "" {
					return Principal{Name: name, Method: "certificate"}, nil, nil
				}
				return Principal{}, nil, refuse(failNoIdentity, "the client certificate has no identity (no URI SAN, CN or DNS SAN)")
			}
		}
	}
	switch {
	case a.tokens != nil && a.mtls:
		return Principal{}, nil, refuse(failNoCredentials, "a bearer token or a client certificate is required")
	case a.tokens != nil:
		return Principal{}, nil, refuse(failNoCredentials, "a bearer token is required (authorization: Bearer <token>)")
	}
	return Principal{}, nil, refuse(failNoCredentials, "a client certificate is required")
}

// track registers a stream running under a token, then checks the token again: a reload between authenticate and track would otherwise miss it. The function it
// returns unregisters the stream.
func (a *auth) track(ts *tokenStream) (untrack func()) {
	a.mu.Lock()
	if a.live == nil {
		a.live = map[*tokenStream]struct{}{}
	}
	a.live[ts] = struct{}{}
	a.mu.Unlock()
	if name, ok := a.tokens.LookupHash(ts.hash); !ok || name != ts.name {
		ts.end(errRevoked)
	}
	return func() {
		a.mu.Lock()
		delete(a.live, ts)
		a.mu.Unlock()
	}
}

// revokeStale ends every stream whose token is no longer valid for its name (removed from
// the file, the file emptied, deleted or refused: daemon.TokenSet.Reload). It runs after
// each change of the tokens.
func (a *auth) revokeStale() {
	a.mu.Lock()
	var ended []*tokenStream
	for ts := range a.live {
		if name, ok := a.tokens.LookupHash(ts.hash); !ok || name != ts.name {
			ts.end(errRevoked)
			ended = append(ended, ts)
		}
	}
	a.mu.Unlock()
	for _, ts := range ended {
		a.log.Warn("stream ended: its token was revoked", "principal", ts.name, "method", ts.method)
	}
}

// revokingTokens is the tokens as the file watcher reloads them: each change ends the
// streams whose token it revoked.
type revokingTokens struct {
	*daemon.TokenSet
	a *auth
}

func (r revokingTokens) Reload() (bool, error) {
	changed, err := r.TokenSet.Reload()
	if changed {
		r.a.revokeStale()
	}
	return changed, err
}

// certPrincipal is the identity of a verified client certificate: its first URI SAN (a
// SPIFFE id), else its subject CN, else its first DNS SAN.
func certPrincipal(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return ""
}

// exempt: the health service answers every peer (load balancers and probes carry no
// credentials; it tells nothing but SERVING or not).
func exempt(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") }

// authStream is the stream interceptor: every stream but health's needs a principal,
// which the handler finds in its context (principalFrom).
func (a *auth) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if exempt(info.FullMethod) {
		return handler(srv, ss)
	}
	pr, hash, err := a.check(ss.Context())
	if err != nil {
		return err
	}
	ctx := context.WithValue(ss.Context(), principalKey{}, pr)
	if hash == nil {
		return handler(srv, &principalStream{ServerStream: ss, ctx: ctx})
	}
	ctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	defer a.track(&tokenStream{hash: *hash, name: pr.Name, method: info.FullMethod, end: end})()
	err = handler(srv, &principalStream{ServerStream: ss, ctx: ctx})
	if errors.Is(context.Cause(ctx), errRevoked) {
		// The handler saw its context end; the client is told why.
		return toStatus(errRevoked)
	}
	return err
}

// authUnary is the unary interceptor (the player serves none of its own; registered
// services such as reflection's are authenticated too).
func (a *auth) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if exempt(info.FullMethod) {
		return handler(ctx, req)
	}
	pr, _, err := a.check(ctx)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, principalKey{}, pr), req)
}

// errConnFailed refuses, unchecked, the calls of a connection whose authentication failed.
var errConnFailed = fmt.Errorf("%w: an earlier call on this connection failed to authenticate; reconnect", ErrUnauthenticated)

// check authenticates a call in its connection's turn (trackedConn.enter) and, when it
// succeeds, marks the connection authenticated (Config.AuthTimeout no longer applies to
// it); a failure is answered by failed. The error is a gRPC status.
func (a *auth) check(ctx context.Context) (Principal, *[sha256.Size]byte, error) {
	c := connOf(peer.FromContext(ctx))
	if c != nil {
		ok, leave := c.enter(ctx.Done())
		defer leave()
		if !ok {
			if ctx.Err() != nil {
				return Principal{}, nil, toStatus(ctx.Err())
			}
			return Principal{}, nil, toStatus(errConnFailed)
		}
	}
	pr, hash, err := a.authenticate(ctx)
	if err != nil {
		return Principal{}, nil, a.failed(ctx, c, err)
	}
	if c != nil {
		c.authenticated()
	}
	return pr, hash, nil
}

// failed answers a failed authentication: it is counted and logged (the peer, the method
// and the reason, never the token; at most a line a second, with the count of those held
// back), answered after Config.AuthFailureDelay, and its connection is closed once the
// answer is sent. With the connection's turns (trackedConn.enter), they bound guessing: a
// connection checks one wrong credential, then pays a new connection — within
// max_unauthenticated_connections — and the delay again.
func (a *auth) failed(ctx context.Context, c *trackedConn, err error) error {
	reason := failNoCredentials
	var f *authFailure
	if errors.As(err, &f) {
		reason = f.reason
	}
	a.failures.WithLabelValues(reason).Inc()
	if c != nil {
		c.fail()
	}
	if ok, suppressed := a.failLog.allow(); ok {
		addr := ""
		if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
			addr = pr.Addr.String()
		}
		method, _ := grpc.Method(ctx)
		a.log.Warn("authentication failed", "peer", addr, "method", method, "reason", reason, "err", err, "suppressed", suppressed)
	}
	wait := time.NewTimer(a.failDelay)
	select {
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
	case <-a.done:
		wait.Stop()
	}
	if c != nil {
		c.closeSoon()
	}
	return toStatus(err)
}

type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *principalStream) Context() context.Context { return s.ctx }
