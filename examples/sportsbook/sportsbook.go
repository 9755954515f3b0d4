// Package sportsbook is an example service that embeds cacheclient over the demo schema
// (examples/sportsbook/demo): it keeps the sports, events, event_markets and selections views in
// memory, indexes events by sport, competition, tag and status, markets by event and
// selections by market, answers HTTP lookups from memory only, and logs event changes.
// The index rules are exported (EventIndexes, MarketIndexes, SelectionIndexes) so that
// checks (cmd/internal/devenv's convergence check, the tests) use the very same rules.
//
// Endpoints (JSON): /sports, /sports/{id}/events, /events/{id} (with its markets and their
// selections), /competitions/{id}/events, /tags/{tag}/events, /status/{status}/events,
// /stats, /status (the cache's status page, cacheclient/cachestatus), /metrics
// (Prometheus), /readyz, /livez.
//
// With a database (Config.DB), two endpoints write to PostgreSQL and answer from the cache
// with the row as written (read-your-writes, write.go): POST /selections/{id}/price and
// POST /markets/{id}/suspend (or /resume).
package sportsbook

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cacheclient/cacheprom"
	"github.com/statecast/statecast/cacheclient/cachestatus"
)

// Light objects: only the fields the service serves.
type (
	Sport struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	Event struct {
		ID            int64    `json:"id"`
		CompetitionID int64    `json:"competition_id"`
		SportID       int64    `json:"sport_id"` // the competition's sport (joined in the view)
		Name          string   `json:"name"`
		StartsAt      string   `json:"starts_at"`
		Status        string   `json:"status"`
		Tags          []string `json:"tags"`
	}
	Market struct {
		EventID     int64  `json:"event_id"`
		MarketID    int64  `json:"market_id"`
		Competition string `json:"competition"`
		Market      string `json:"market"`
		Suspended   bool   `json:"suspended"`
	}
	Selection struct {
		MarketID int64  `json:"market_id"`
		ID       int64  `json:"id"`
		Name     string `json:"name"`
		Price    string `json:"price"` // numeric: exact decimal text
	}
)

// decodeJSON is the views' decoder: github.com/goccy/go-json decodes 4–5×
// faster than encoding/json with the same results (docs/BENCHMARKS.md), which
// is most of a cold start's CPU. UnmarshalNoEscape: &v does not outlive the call.
func decodeJSON[T any](_ string, b []byte) (T, error) {
	var v T
	err := gojson.UnmarshalNoEscape(b, &v)
	return v, err
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// The service's secondary indexes: index name → the values an object is indexed under.
// Read-only; New registers exactly these.
var (
	EventIndexes = map[string]func(Event) []string{
		"sport":       func(e Event) []string { return []string{itoa(e.SportID)} },
		"competition": func(e Event) []string { return []string{itoa(e.CompetitionID)} },
		"tag":         func(e Event) []string { return e.Tags },
		"status":      func(e Event) []string { return []string{e.Status} },
	}
	MarketIndexes = map[string]func(Market) []string{
		"event": func(m Market) []string { return []string{itoa(m.EventID)} },
	}
	SelectionIndexes = map[string]func(Selection) []string{
		"market": func(x Selection) []string { return []string{itoa(x.MarketID)} },
	}
)

// addIndexes registers rules on v in name order.
func addIndexes[T any](v *cacheclient.View[T], rules map[string]func(T) []string) error {
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		if err := v.AddIndex(name, rules[name]); err != nil {
			return err
		}
	}
	return nil
}

// Config configures the service.
type Config struct {
	// Client is the cache client's config (players, stream, service, state directory).
	Client cacheclient.Config
	// DB, when set, is the demo database the write endpoints change; without it they
	// answer 501. The service does not close it.
	DB *pgxpool.Pool
	// WriteWait bounds how long a write endpoint waits for the cache to reflect its write
	// before answering 504 (default DefaultWriteWait).
	WriteWait time.Duration
}

// DefaultWriteWait is Config.WriteWait's default: far above the commit-to-cache latency of
// a running pipeline, short enough that a stopped distributor shows as an error.
const DefaultWriteWait = 5 * time.Second

// Service is the example service.
type Service struct {
	Client     *cacheclient.Client
	Sports     *cacheclient.View[Sport]
	Events     *cacheclient.View[Event]
	Markets    *cacheclient.View[Market]
	Selections *cacheclient.View[Selection]
	db         *pgxpool.Pool
	writeWait  time.Duration
	log        *slog.Logger
	reg        *prometheus.Registry
}

// New registers the views, indexes and the change logger on a new client.
func New(cfg Config, log *slog.Logger) (*Service, error) {
	if cfg.WriteWait < 0 {
		return nil, errors.New("sportsbook: WriteWait must not be negative")
	}
	if cfg.WriteWait == 0 {
		cfg.WriteWait = DefaultWriteWait
	}
	c, err := cacheclient.New(cfg.Client, cacheclient.WithLogger(log))
	if err != nil {
		return nil, err
	}
	s := &Service{Client: c, db: cfg.DB, writeWait: cfg.WriteWait, log: log, reg: prometheus.NewRegistry()}
	if s.Sports, err = cacheclient.Register(c, "sports", decodeJSON[Sport]); err != nil {
		return nil, err
	}
	if s.Events, err = cacheclient.Register(c, "events", decodeJSON[Event]); err != nil {
		return nil, err
	}
	if s.Markets, err = cacheclient.Register(c, "event_markets", decodeJSON[Market]); err != nil {
		return nil, err
	}
	if s.Selections, err = cacheclient.Register(c, "selections", decodeJSON[Selection]); err != nil {
		return nil, err
	}
	for _, err := range []error{
		addIndexes(s.Events, EventIndexes),
		addIndexes(s.Markets, MarketIndexes),
		addIndexes(s.Selections, SelectionIndexes),
		cacheclient.OnChange(s.Events, s.logChange),
	} {
		if err != nil {
			return nil, err
		}
	}
	s.reg.MustRegister(cacheprom.NewCollector(c, nil))
	return s, nil
}

// Registry is the registry /metrics serves: the cache's metrics; a program adds its own
// (the build info) here.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

func (s *Service) logChange(_ context.Context, ch cacheclient.Change[Event]) error {
	switch ch.Op {
	case cacheclient.OpDelete:
		s.log.Info("event removed", "id", ch.Key, "name", ch.Old.Name, "position", ch.Position)
	case cacheclient.OpCreate:
		s.log.Info("event added", "id", ch.Key, "name", ch.New.Name, "status", ch.New.Status, "position", ch.Position)
	default:
		s.log.Info("event changed", "id", ch.Key, "name", ch.New.Name, "status", ch.Old.Status+"→"+ch.New.Status, "position", ch.Position)
	}
	return nil
}

// EventDetail is an event with its markets and their selections.
type EventDetail struct {
	Event
	Markets []MarketDetail `json:"markets"`
}

// MarketDetail is a market with its selections.
type MarketDetail struct {
	Market
	Selections []Selection `json:"selections"`
}

func byID[T any](xs []T, id func(T) int64) []T {
	slices.SortFunc(xs, func(a, b T) int { return int(id(a) - id(b)) })
	return xs
}

// Event returns an event with its markets and selections, read from memory.
func (s *Service) Event(id string) (EventDetail, bool) {
	e, ok := s.Events.Get(id)
	if !ok {
		return EventDetail{}, false
	}
	d := EventDetail{Event: e, Markets: []MarketDetail{}}
	for _, m := range byID(s.Markets.ByIndex("event", id), func(m Market) int64 { return m.MarketID }) {
		sel := byID(s.Selections.ByIndex("market", itoa(m.MarketID)), func(x Selection) int64 { return x.ID })
		if sel == nil {
			sel = []Selection{}
		}
		d.Markets = append(d.Markets, MarketDetail{Market: m, Selections: sel})
	}
	return d, true
}

// Handler serves the HTTP API.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	events := func(index string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			es := byID(s.Events.ByIndex(index, r.PathValue("v")), func(e Event) int64 { return e.ID })
			if es == nil {
				es = []Event{}
			}
			writeJSON(w, es)
		}
	}
	mux.HandleFunc("GET /events/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, ok := s.Event(r.PathValue("id"))
		if !ok {
			http.Error(w, "no such event", http.StatusNotFound)
			return
		}
		writeJSON(w, d)
	})
	mux.HandleFunc("GET /sports/{v}/events", events("sport"))
	mux.HandleFunc("GET /competitions/{v}/events", events("competition"))
	mux.HandleFunc("GET /tags/{v}/events", events("tag"))
	mux.HandleFunc("GET /status/{v}/events", events("status"))
	mux.HandleFunc("GET /sports", func(w http.ResponseWriter, r *http.Request) {
		var out []Sport
		s.Sports.Range(func(_ string, sp Sport) bool { out = append(out, sp); return true })
		writeJSON(w, byID(out, func(s Sport) int64 { return s.ID }))
	})
	mux.HandleFunc("POST /selections/{id}/price", s.setPrice)
	mux.HandleFunc("POST /markets/{id}/suspend", func(w http.ResponseWriter, r *http.Request) { s.setSuspended(w, r, true) })
	mux.HandleFunc("POST /markets/{id}/resume", func(w http.ResponseWriter, r *http.Request) { s.setSuspended(w, r, false) })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.Client.Stats()) })
	// The cache's status page (HTML for a browser, JSON for curl). It names the views and
	// positions, nothing of their rows: on a service's own port in this example; a service
	// with a separate admin port mounts it there.
	mux.Handle("GET /status", cachestatus.Handler(s.Client))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.Client.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Run serves HTTP on addr and runs the client until ctx ends.
func (s *Service) Run(ctx context.Context, addr string) error {
	// Every bound a public HTTP server needs: a client that sends slowly, reads slowly or
	// keeps an idle connection open holds a goroutine and its buffers until one ends it.
	srv := &http.Server{Addr: addr, Handler: s.Handler(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	runErr := s.Client.Run(ctx)
	srv.Shutdown(context.Background())
	if err := <-errc; err != nil && err != http.ErrServerClosed {
		return err
	}
	return runErr
}
