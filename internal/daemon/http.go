package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace bounds how long Serve waits for requests in flight when its context ends.
const ShutdownGrace = 5 * time.Second

// timeouts are an HTTP server's bounds on one connection.
type timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// httpTimeouts bound what one connection to a daemon's endpoint may hold: its request
// (headers, then the whole request: the endpoints take no bodies worth the name), its
// answer, and its idle time between requests (a scraper reconnects in a few milliseconds;
// an idle connection kept for ever costs a goroutine and its buffers). An action (any
// method but GET and HEAD: a reconcile reads a whole view) may take longer to answer than
// Write: its handler runs without the write bound.
var httpTimeouts = timeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: 10 * time.Second}

// HTTPServer is a daemon's HTTP endpoint, listening but not serving until Serve.
type HTTPServer struct {
	ln  net.Listener
	srv *http.Server
}

// ListenHTTP listens on addr for h. Daemons call it first in Run, so that a taken port
// fails the start before anything connects.
func ListenHTTP(addr string, h http.Handler) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http_addr: %w", err)
	}
	t := httpTimeouts
	return &HTTPServer{ln: ln, srv: &http.Server{Handler: unboundActions(h),
		ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}}, nil
}

// unboundActions lifts the write bound for requests that act (not GET or HEAD): their
// answer comes when the action is done.
func unboundActions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		}
		h.ServeHTTP(w, r)
	})
}

// Addr is the address the server listens on (the port chosen for ":0").
func (s *HTTPServer) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down, waiting at most ShutdownGrace for the
// requests in flight. It returns nil after a shutdown, or the error that stopped serving.
func (s *HTTPServer) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// Close stops a server that will not be served (an error after ListenHTTP).
func (s *HTTPServer) Close() error { return s.ln.Close() }

// tlsListener serves TLS with cfg on ln.
func tlsListener(ln net.Listener, cfg *tls.Config) net.Listener { return tls.NewListener(ln, cfg) }
