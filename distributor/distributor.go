package distributor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/statuspage"
)

// Option configures a Distributor.
type Option func(*options)

type options struct {
	log *slog.Logger
	reg prometheus.Registerer
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the metrics with r (default: a registry of the Distributor's
// own). /metrics serves r when r is also a prometheus.Gatherer, as a *prometheus.Registry
// is; otherwise /metrics is not served, and the program that owns r exposes it.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// Distributor publishes the configured views into their streams. Create it with New, run
// it with Run. Reconcile, WaitReady and Handler are safe for concurrent use.
type Distributor struct {
	cfg    Config
	log    *slog.Logger
	gather prometheus.Gatherer // what /metrics serves; nil: not served
	m      *metrics
	pool   *pgxpool.Pool
	admin  *daemon.AdminServer // nil: Config.Admin.Addr empty

	streams []*stream
	byView  map[string]*stream

	mu      sync.Mutex
	running bool
	done    chan struct{} // closed when Run returns; runErr is then set
	runErr  error

	started time.Time           // New: the status page's uptime
	hist    *statuspage.History // the status page's charts
}

// New validates a copy of cfg (Config.Validate) and returns a Distributor. It does not
// connect: Run does.
func New(cfg Config, opts ...Option) (*Distributor, error) {
	cfg = cfg.clone()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
	}
	d := &Distributor{cfg: cfg, log: o.log, byView: map[string]*stream{}, done: make(chan struct{}),
		started: time.Now(), hist: statuspage.NewHistory()}
	if cfg.Admin.Addr != "" {
		var err error
		if d.admin, err = daemon.LoadAdmin(cfg.Admin, "admin"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	d.gather, _ = o.reg.(prometheus.Gatherer)
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
	}
	d.m = m
	return d, nil
}

// Run serves HTTP on Config.HTTPAddr when it is set (Handler's endpoints) and on
// Config.Admin.Addr (AdminHandler's, behind its tokens), connects to
// PostgreSQL and Kafka, makes sure every stream's topic exists (created compacted with one
// partition; an unusable one is refused), and runs every stream until ctx ends: each waits
// for its advisory lock (standby), restores its state from the topic, publishes its start-up
// epochs, then polls and reconciles. It returns nil after ctx ends (graceful shutdown), or
// the first fatal error: a taken HTTP address, a bad topic or a view that cannot be
// published (*ViewError; nothing of that view was published). Run may be called once.
func (d *Distributor) Run(ctx context.Context) (err error) {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("distributor: Run called twice")
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		d.runErr = err
		close(d.done)
	}()

	pcfg, err := pgxpool.ParseConfig(d.cfg.Postgres.DSN)
	if err != nil {
		return fmt.Errorf("%w: postgres.dsn: %v", ErrConfig, err)
	}
	var hs *daemon.HTTPServer
	if d.cfg.HTTPAddr != "" {
		if hs, err = daemon.ListenHTTP(d.cfg.HTTPAddr, d.Handler()); err != nil {
			return fmt.Errorf("distributor: %w", err)
		}
		defer hs.Close() // when Run fails before serving
	}
	var as *daemon.HTTPServer
	if d.admin != nil {
		if as, err = d.admin.Listen(d.AdminHandler()); err != nil {
			return fmt.Errorf("distributor: %w", err)
		}
		defer as.Close()
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("distributor: postgres: %w", err)
	}
	defer pool.Close()
	d.pool = pool

	admin, err := sarama.NewClusterAdmin(d.cfg.Kafka.Brokers, d.cfg.Kafka.clientConfig("-admin"))
	if err != nil {
		return fmt.Errorf("distributor: kafka admin: %w", err)
	}
	streams := make([]*stream, 0, len(d.cfg.Streams))
	for i := range d.cfg.Streams {
		sc := &d.cfg.Streams[i]
		maxBytes, err := ensureTopic(admin, sc)
		if err != nil {
			_ = admin.Close()
			return err
		}
		if m := d.cfg.Kafka.MaxMessageBytes; m > 0 && m < maxBytes {
			maxBytes = m
		}
		s := newStream(d, sc)
		s.cfg.maxBytes = maxBytes
		streams = append(streams, s)
	}
	_ = admin.Close()
	d.mu.Lock()
	d.streams = streams
	for _, s := range streams {
		for _, v := range s.cfg.Views {
			d.byView[v.Name] = s
		}
	}
	d.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, len(streams)+2)
	for _, s := range []*daemon.HTTPServer{hs, as} {
		if s != nil {
			wg.Go(func() {
				if err := s.Serve(ctx); err != nil {
					errc <- fmt.Errorf("distributor: %w", err)
				}
			})
		}
	}
	if d.admin != nil {
		wg.Go(func() { daemon.Watch(ctx, daemon.DefaultReloadInterval, d.log, d.admin.Reloadables()...) })
	}
	for _, g := range groupsOf(d, streams) {
		wg.Go(func() {
			if err := g.run(ctx); err != nil {
				errc <- err
			}
		})
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		d.log.Error("distributor stopping", "err", first)
	}
	cancel()
	wg.Wait()
	return first
}

// Reconcile publishes a new epoch of the named view now, in its refresh mode (reconcile:
// changed/missing rows and tombstones for vanished keys; rewrite: every row), and returns
// when it is acknowledged. It fails with ErrUnknownView, or ErrNotActive while this
// Distributor is a standby or not running.
func (d *Distributor) Reconcile(ctx context.Context, view string) error {
	d.mu.Lock()
	s := d.byView[view]
	d.mu.Unlock()
	if s == nil {
		if _, v := d.cfg.view(view); v == nil {
			return fmt.Errorf("%w: %q", ErrUnknownView, view)
		}
		return ErrNotActive
	}
	if !s.active.Load() {
		return ErrNotActive
	}
	done := make(chan error, 1)
	select {
	case s.reconcileCh <- reconcileReq{view: view, done: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Views lists the configured view names, in configuration order.
func (d *Distributor) Views() []string {
	var out []string
	for _, s := range d.cfg.Streams {
		for _, v := range s.Views {
			out = append(out, v.Name)
		}
	}
	return out
}

// WaitReady returns nil when every stream has published its start-up epochs (for a
// standby: after it took over). It returns ctx's error, or ErrStopped (wrapping Run's
// error) when Run returned before that.
func (d *Distributor) WaitReady(ctx context.Context) error {
	for {
		d.mu.Lock()
		streams := d.streams
		d.mu.Unlock()
		if streams != nil {
			for _, s := range streams {
				select {
				case <-s.ready:
				case <-d.done:
					return fmt.Errorf("%w: %w", ErrStopped, d.runErr)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%w: %w", ErrStopped, d.runErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Active reports whether this Distributor holds the lock of every stream.
func (d *Distributor) Active() bool {
	d.mu.Lock()
	streams := d.streams
	d.mu.Unlock()
	for _, s := range streams {
		if !s.active.Load() {
			return false
		}
	}
	return len(streams) > 0
}
