package distributor

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves what Run serves on Config.HTTPAddr, the read-only endpoint:
//
//	GET  /livez              200 while the process serves: restart it when this fails
//	GET  /readyz             200 for a healthy active or standby, else 503; JSON Readiness
//	GET  /healthz            the same as /livez, with {"streams":{topic:"active"|"standby"}}
//	GET  /metrics            Prometheus metrics (see WithRegisterer)
//
// Run serves it from its start, before it reaches Kafka: /livez answers while Run still
// retries its start-up, /readyz says why it is not ready.
func (d *Distributor) Handler() http.Handler {
	mux := http.NewServeMux()
	if d.gather != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(d.gather, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /readyz", d.serveReadyz)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"live":true}` + "\n"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		streams := d.streams
		d.mu.Unlock()
		st := map[string]string{}
		for _, s := range streams {
			if s.active.Load() {
				st[s.cfg.Topic] = "active"
			} else {
				st[s.cfg.Topic] = "standby"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"streams": st})
	})
	return mux
}

// AdminHandler serves what Run serves on Config.Admin.Addr (behind its tokens when set):
//
//	GET  /status             Status: an HTML page for a browser (Accept names text/html,
//	                         not application/json), JSON to anything else: streams,
//	                         views, stopped views and why, positions
//	GET  /status.json        the same JSON, whatever the Accept header
//	POST /reconcile?view=V   runs Reconcile(V); 200, 404 unknown view, 503 not active, 500
//
// A reconcile reads the whole view (in rewrite mode every row is published again to every
// cache): keep this endpoint off the network, or behind tokens.
func (d *Distributor) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	d.hist.Start(d.done, d.sample)
	status := d.statusHandler()
	mux.Handle("GET /status", status)
	mux.Handle("GET /status.json", status)
	mux.HandleFunc("POST /reconcile", func(w http.ResponseWriter, r *http.Request) {
		view := r.URL.Query().Get("view")
		err := d.Reconcile(r.Context(), view)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusOK)
			return
		case isErr(err, ErrUnknownView):
			http.Error(w, err.Error(), http.StatusNotFound)
		case isErr(err, ErrNotActive):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	return mux
}
