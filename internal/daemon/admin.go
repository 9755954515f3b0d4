package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Admin is a daemon's admin HTTP endpoint (pages that show client identities, actions
// such as a reconcile), served apart from the read-only one (/metrics, /healthz). It
// needs a token unless it listens on a loopback address only.
type Admin struct {
	// Addr is where the admin endpoint listens; empty: not served.
	Addr string `yaml:"addr"`
	// Tokens, when set, are required on every admin request (Authorization: Bearer).
	// Required when Addr is not a loopback address.
	Tokens Tokens `yaml:"tokens"`
	// TLS serves the admin endpoint over HTTPS (cert_file, key_file; client_ca_file is
	// not used here). Required with Tokens when Addr is not a loopback address, unless
	// Insecure.
	TLS ServerTLS `yaml:"tls"`
	// Insecure accepts Tokens over plaintext HTTP on an address beyond loopback: only for
	// a network whose every hop is trusted, such as containers publishing the endpoint on
	// their host's loopback. Warned of at start.
	Insecure bool `yaml:"insecure"`
}

// Check checks a's fields (not the files); field is the config field (admin).
func (a Admin) Check(field string) error {
	var errs []error
	if a.Addr != "" && !a.Tokens.Enabled() && !IsLoopback(a.Addr) {
		errs = append(errs, fmt.Errorf("%s.addr: %q listens beyond this host: set %s.tokens, or a loopback address (127.0.0.1:port)", field, a.Addr, field))
	}
	if a.plaintextTokens() && !a.Insecure {
		errs = append(errs, fmt.Errorf("%s.tls: required with %s.tokens on %q, which listens beyond this host: a token sent over plaintext HTTP can be read on the network (set %s.tls.cert_file and key_file, or a loopback address; %s.insecure: true accepts it on a trusted network)", field, field, a.Addr, field, field))
	}
	if a.Insecure && a.TLS.Enabled() {
		errs = append(errs, fmt.Errorf("%s.insecure: true with %s.tls set: the endpoint is served over TLS, drop %s.insecure", field, field, field))
	}
	if a.TLS.ClientCAFile != "" {
		errs = append(errs, fmt.Errorf("%s.tls.client_ca_file: not supported on the admin endpoint (use %s.tokens)", field, field))
	}
	errs = append(errs, a.TLS.Check(field+".tls"))
	return errors.Join(errs...)
}

// plaintextTokens reports whether a takes tokens over plaintext HTTP beyond loopback.
func (a Admin) plaintextTokens() bool {
	return a.Addr != "" && a.Tokens.Enabled() && !a.TLS.Enabled() && !IsLoopback(a.Addr)
}

// IsLoopback reports whether addr (host:port) listens on a loopback interface only: a
// loopback IP or "localhost". An empty host (":7072") listens on every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AdminServer is a loaded Admin: its tokens and certificate, each reloadable.
type AdminServer struct {
	cfg    Admin
	tokens *TokenSet // nil: no token required (loopback)
	tls    *TLSFiles // nil: plain HTTP
	log    *slog.Logger

	failures atomic.Uint64 // requests refused for their token
	failLog  struct {      // at most a log line a second about them
		sync.Mutex
		last       time.Time
		suppressed int
	}
}

// AdminAuthFailureDelay is how long a request with a wrong admin token waits for its 401,
// after which its connection is closed: a guess costs a second and a new connection.
const AdminAuthFailureDelay = time.Second

// adminFailureDelay is AdminAuthFailureDelay (shorter in tests).
var adminFailureDelay = AdminAuthFailureDelay

// AdminOption configures LoadAdmin.
type AdminOption func(*AdminServer)

// WithAdminLogger is where the endpoint logs its refused tokens (default: nowhere).
func WithAdminLogger(log *slog.Logger) AdminOption {
	return func(s *AdminServer) { s.log = log }
}

// LoadAdmin checks a and loads its tokens and certificate.
func LoadAdmin(a Admin, field string, opts ...AdminOption) (*AdminServer, error) {
	if err := a.Check(field); err != nil {
		return nil, err
	}
	s := &AdminServer{cfg: a, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if a.plaintextTokens() {
		s.log.Warn("the admin endpoint takes its tokens over plaintext HTTP beyond loopback: anyone on the network path can read them", "field", field+".insecure", "addr", a.Addr)
	}
	var err error
	if a.Tokens.Enabled() {
		if s.tokens, err = LoadTokens(a.Tokens, field+".tokens"); err != nil {
			return nil, err
		}
	}
	if a.TLS.Enabled() {
		if s.tls, err = LoadTLS(a.TLS, field+".tls"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Tokens are the endpoint's tokens (nil: none required).
func (s *AdminServer) Tokens() *TokenSet { return s.tokens }

// Reloadables are what Watch should keep current.
func (s *AdminServer) Reloadables() []Reloadable {
	var out []Reloadable
	if s.tokens != nil {
		out = append(out, s.tokens)
	}
	if s.tls != nil {
		out = append(out, s.tls)
	}
	return out
}

// AuthFailures is the number of requests refused for their token (none, or a wrong one)
// since the endpoint was loaded.
func (s *AdminServer) AuthFailures() uint64 { return s.failures.Load() }

// Guard wraps h: a request a browser page could have made for another site is refused
// (GuardBrowsers); with tokens, a request without a valid bearer token gets 401 (the
// response names neither the token nor the reason it was refused). A refusal is counted
// (AuthFailures) and logged without the token (at most a line a second); one that sent a
// wrong token is answered after AdminAuthFailureDelay; either closes its connection.
func (s *AdminServer) Guard(h http.Handler) http.Handler {
	return GuardBrowsers(IsLoopback(s.cfg.Addr), guardTokens(s.tokens, h, s.refused))
}

// refused counts, logs and delays a request refused for its token (sent: it sent one).
func (s *AdminServer) refused(r *http.Request, sent bool) {
	s.failures.Add(1)
	reason := "no_token"
	if sent {
		reason = "bad_token"
	}
	s.failLog.Lock()
	now, log, suppressed := time.Now(), false, 0
	if now.Sub(s.failLog.last) >= time.Second {
		s.failLog.last, log, suppressed, s.failLog.suppressed = now, true, s.failLog.suppressed, 0
	} else {
		s.failLog.suppressed++
	}
	s.failLog.Unlock()
	if log {
		s.log.Warn("admin authentication failed", "peer", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
			"reason", reason, "suppressed", suppressed)
	}
	if !sent {
		return
	}
	t := time.NewTimer(adminFailureDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// GuardBrowsers wraps h so that a web page the operator's browser shows cannot use the
// endpoint (cross-site request forgery): a loopback endpoint without tokens trusts
// anything that reaches it, and a browser reaches loopback. Refused with 403:
//
//   - a request that changes state (not GET, HEAD or OPTIONS) from another origin, as the
//     browser says in Sec-Fetch-Site or Origin (http.CrossOriginProtection): a form's POST
//     needs no script and no CORS preflight;
//   - on a loopback endpoint (loopback), any request whose Host is not a loopback name or
//     address: a page whose DNS name is rebound to 127.0.0.1 is same-origin to the browser,
//     and could read the status pages too.
//
// curl, cachectl and other programs send neither header and the Host they dialled: they
// pass.
func GuardBrowsers(loopback bool, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden: a cross-origin request to the admin endpoint (a browser page cannot act here)", http.StatusForbidden)
	}))
	guarded := cop.Handler(h)
	if !loopback {
		return guarded
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "forbidden: this admin endpoint answers requests for a loopback host only (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this host: localhost or a loopback IP,
// with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// guardTokens wraps h so that every request needs a token of tokens (nil: h as it is).
// refused (when not nil) is called with each request refused, before its answer, and the
// connection of a refused request is closed after it.
func guardTokens(tokens *TokenSet, h http.Handler, refused func(r *http.Request, sent bool)) http.Handler {
	if tokens == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := BearerToken(r.Header.Get("Authorization"))
		if _, ok := tokens.Lookup(tok); !ok {
			if refused != nil {
				refused(r, tok != "")
				// HTTP/1 closes the connection after the answer; HTTP/2 sends GOAWAY.
				w.Header().Set("Connection", "close")
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="statecast admin"`)
			http.Error(w, "unauthorized: an admin bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Listen listens on the admin address for h (guarded), over TLS when configured.
func (s *AdminServer) Listen(h http.Handler) (*HTTPServer, error) {
	hs, err := ListenHTTP(s.cfg.Addr, s.Guard(h))
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if s.tls != nil {
		hs.ln = tlsListener(hs.ln, s.tls.ServerConfig(false, "h2", "http/1.1"))
	}
	return hs, nil
}
