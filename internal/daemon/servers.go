package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Servers are a daemon's two HTTP endpoints, each optional: the read-only one on its
// http_addr (/metrics, /livez, /readyz, /healthz) and the admin one (an AdminServer: behind
// its tokens, over TLS when configured). Both daemons' Run listen with ListenServers before
// anything connects, so that a taken port fails the start, and Serve them until Run ends.
type Servers struct {
	http, admin *HTTPServer // nil: not served
	reload      []Reloadable
}

// ListenServers listens on httpAddr for the handler h returns (not when httpAddr is empty)
// and, when admin is not nil, on its address for the handler ah returns. Each function is
// called only for an endpoint that is served: a handler may start work (a status page
// samples its charts from then on). When one fails, nothing is left listening.
func ListenServers(httpAddr string, h func() http.Handler, admin *AdminServer, ah func() http.Handler) (*Servers, error) {
	s := &Servers{}
	var err error
	if httpAddr != "" {
		if s.http, err = ListenHTTP(httpAddr, h()); err != nil {
			return nil, err
		}
	}
	if admin != nil {
		if s.admin, err = admin.Listen(ah()); err != nil {
			s.Close()
			return nil, err
		}
		s.reload = admin.Reloadables()
	}
	return s, nil
}

// Listening reports whether an endpoint listens.
func (s *Servers) Listening() bool { return s.http != nil || s.admin != nil }

// Attrs are the endpoints' addresses as log attributes for the daemon's "listening" line:
// "http" and "admin", "" for one not served (the port chosen for ":0" otherwise).
func (s *Servers) Attrs() []any {
	var httpAddr, adminAddr string
	if s.http != nil {
		httpAddr = s.http.Addr().String()
	}
	if s.admin != nil {
		adminAddr = s.admin.Addr().String()
	}
	return []any{"http", httpAddr, "admin", adminAddr}
}

// Serve serves the endpoints until ctx ends or one of them fails, then shuts them all down
// (HTTPServer.Serve: at most ShutdownGrace for the requests in flight). Meanwhile it reads
// the admin endpoint's token and certificate files again every reloadInterval (Watch,
// logging to log). It returns when every endpoint has stopped: nil after ctx ended, or the
// error that stopped the first one that failed. With no endpoint it returns nil at once.
func (s *Servers) Serve(ctx context.Context, reloadInterval time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	for _, hs := range []*HTTPServer{s.http, s.admin} {
		if hs != nil {
			wg.Go(func() {
				if err := hs.Serve(ctx); err != nil {
					errc <- err
					cancel()
				}
			})
		}
	}
	if len(s.reload) > 0 {
		wg.Go(func() { Watch(ctx, reloadInterval, log, s.reload...) })
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// Close stops the listeners of endpoints that will not be served (Run failed before
// Serve); after Serve it does nothing.
func (s *Servers) Close() {
	for _, hs := range []*HTTPServer{s.http, s.admin} {
		if hs != nil {
			_ = hs.Close()
		}
	}
}
