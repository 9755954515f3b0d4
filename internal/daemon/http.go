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
	return &HTTPServer{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}, nil
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
