package player

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/statecast/statecast/internal/daemon"
)

// TLSConfig names the PEM files of the gRPC server's TLS (Config.TLS): cert_file and
// key_file, read again when they change (a rotated certificate needs no restart), and
// client_ca_file for mutual TLS: a client must then present a certificate of one of those
// CAs (or, when Config.Tokens is set too, a token instead).
type TLSConfig = daemon.ServerTLS

// TokensConfig says where the bearer tokens of the clients are (Config.Tokens): a file
// (read again when it changes, so that a token is revoked by removing its line) and/or an
// environment variable, each holding name=token entries, one a line; a token may be given
// as sha256:<hex> of itself. The name is the principal the token authenticates.
type TokensConfig = daemon.Tokens

// AdminConfig is the admin HTTP endpoint (Config.Admin): the status pages, which show
// client identities. addr (default 127.0.0.1:7072 in a file; empty: not served), tokens
// (required on every request when set; required when addr is not a loopback address), tls
// (cert_file, key_file: HTTPS).
type AdminConfig = daemon.Admin

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
}

// authenticate returns the principal of a call: its bearer token's name when it sends
// one (a wrong token is refused even when the certificate is good), else its verified
// client certificate's identity. Errors never contain the token.
func (a *auth) authenticate(ctx context.Context) (Principal, error) {
	if a.open {
		return Principal{Method: "none"}, nil
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
			name, ok := a.tokens.Lookup(tok)
			if !ok {
				return Principal{}, fmt.Errorf("%w: the bearer token is not valid", ErrUnauthenticated)
			}
			return Principal{Name: name, Method: "token"}, nil
		}
	}
	if a.mtls {
		if pr, ok := peer.FromContext(ctx); ok {
			if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
				if name := certPrincipal(ti.State.VerifiedChains[0][0]); name != "" {
					return Principal{Name: name, Method: "certificate"}, nil
				}
				return Principal{}, fmt.Errorf("%w: the client certificate has no identity (no URI SAN, CN or DNS SAN)", ErrUnauthenticated)
			}
		}
	}
	switch {
	case a.tokens != nil && a.mtls:
		return Principal{}, fmt.Errorf("%w: a bearer token or a client certificate is required", ErrUnauthenticated)
	case a.tokens != nil:
		return Principal{}, fmt.Errorf("%w: a bearer token is required (authorization: Bearer <token>)", ErrUnauthenticated)
	}
	return Principal{}, fmt.Errorf("%w: a client certificate is required", ErrUnauthenticated)
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
	pr, err := a.authenticate(ss.Context())
	if err != nil {
		return toStatus(err)
	}
	return handler(srv, &principalStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), principalKey{}, pr)})
}

// authUnary is the unary interceptor (the player serves none of its own; registered
// services such as reflection's are authenticated too).
func (a *auth) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if exempt(info.FullMethod) {
		return handler(ctx, req)
	}
	pr, err := a.authenticate(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return handler(context.WithValue(ctx, principalKey{}, pr), req)
}

type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *principalStream) Context() context.Context { return s.ctx }
