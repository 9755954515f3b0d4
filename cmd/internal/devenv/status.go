package devenv

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// statusPages serves the status pages of the demo's three parts on one local address: the
// distributor's admin handler under /distributor/ (/distributor/status), the player's under
// /player/, the sportsbook service's cache (cachestatus.Handler) at /cache/status. The
// daemons serve theirs on a loopback admin address without a token; the demo runs them in
// process, so it serves them itself, on loopback too. Each handler is made when its part
// starts, so that its charts sample from then on; the server listens once all three are
// there.
type statusPages struct {
	mux *http.ServeMux
	srv *http.Server
	url string
	wg  sync.WaitGroup
}

func newStatusPages() *statusPages {
	mux := http.NewServeMux()
	return &statusPages{mux: mux, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
}

// mount serves h's paths under prefix ("/distributor": h's /status at /distributor/status).
func (sp *statusPages) mount(prefix string, h http.Handler) {
	sp.mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
}

// handle serves h at path as it is.
func (sp *statusPages) handle(path string, h http.Handler) { sp.mux.Handle(path, h) }

// start serves the pages on addr (a taken port falls back to a free one: the second result).
func (sp *statusPages) start(addr string) (bool, error) {
	lis, moved, err := listen(addr)
	if err != nil {
		return false, err
	}
	sp.url = "http://" + lis.Addr().String()
	sp.wg.Go(func() { _ = sp.srv.Serve(lis) })
	return moved, nil
}

// stop shuts the server down.
func (sp *statusPages) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := sp.srv.Shutdown(ctx)
	sp.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
