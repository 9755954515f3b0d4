package distributor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
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
	health health

	streams []*stream
	byView  map[string]*stream

	mu      sync.Mutex
	running bool
	done    chan struct{} // closed when Run returns; runErr is then set
	runErr  error

	// sendHook, when set before Run, is called by a stream's publisher before it feeds
	// each record to the producer, with the send's context (tests that stop the
	// distributor at a chosen point of an epoch).
	sendHook func(ctx context.Context, topic string)

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
	d.health.phase = "starting"
	cfg.Kafka.LogWarnings(d.log)
	if cfg.Admin.Addr != "" {
		var err error
		if d.admin, err = daemon.LoadAdmin(cfg.Admin.admin(), "admin", daemon.WithAdminLogger(d.log)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	d.gather, _ = o.reg.(prometheus.Gatherer)
	m, err := newMetrics(o.reg)
	if err == nil && d.admin != nil {
		err = o.reg.Register(daemon.NewTokenCollector("statecast_distributor", d.admin.Tokens()))
	}
	if err == nil {
		err = o.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "statecast_distributor_admin_auth_failures_total",
			Help: "Admin endpoint requests refused for their bearer token (none, or a wrong one).",
		}, func() float64 {
			if d.admin == nil {
				return 0
			}
			return float64(d.admin.AuthFailures())
		}))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
	}
	d.m = m
	return d, nil
}

// Run serves HTTP on Config.HTTPAddr when it is set (Handler's endpoints) and on
// Config.Admin.Addr (AdminHandler's, behind its tokens) from its start, connects to
// PostgreSQL and Kafka, makes sure every stream's topic exists (created compacted with one
// partition; an unusable one is refused), and runs every stream until ctx ends: each waits
// for its advisory lock (standby), restores its state from the topic, publishes its start-up
// epochs, then follows the WAL (capture: wal) or polls (capture: poll), and reconciles when
// asked. While Kafka does not answer at start-up, Run retries
// with backoff for Config.StartupTimeout; PostgreSQL is waited for by each stream as a
// standby. Every Config.HealthInterval it checks both (Readiness). It returns nil after ctx
// ends (graceful shutdown), or the first fatal error: a taken HTTP address, Kafka still
// unreachable after the start-up timeout, a bad topic, a configuration the database
// refuses (ErrConfig). A view that cannot be published (*ViewError) stops alone — nothing
// of it is published — and is retried, while the others go on. Run may be called once.
func (d *Distributor) Run(ctx context.Context) (err error) {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("distributor: Run called twice")
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		d.health.setPhase("stopped")
		d.runErr = err
		close(d.done)
	}()

	pcfg, err := pgxpool.ParseConfig(d.cfg.Postgres.DSN)
	if err != nil {
		return fmt.Errorf("%w: postgres.dsn: %v", ErrConfig, err)
	}
	if !strings.Contains(d.cfg.Postgres.DSN, "pool_max_conns") {
		pcfg.MaxConns = max(pcfg.MaxConns, d.cfg.poolConns())
	}
	srv, err := daemon.ListenServers(d.cfg.HTTPAddr, d.Handler, d.admin, d.AdminHandler)
	if err != nil {
		return fmt.Errorf("distributor: %w", err)
	}
	defer srv.Close() // when Run fails before serving

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // a failed start-up: the servers end after cancel
	defer cancel()
	errc := make(chan error, len(d.cfg.Streams)+2)
	// The endpoints answer from here on: /livez while the start-up retries, /readyz
	// saying why it is not ready yet.
	wg.Go(func() {
		if err := srv.Serve(ctx, daemon.DefaultReloadInterval, d.log); err != nil {
			errc <- fmt.Errorf("distributor: %w", err)
		}
	})
	if srv.Listening() {
		d.log.Info("distributor listening", srv.Attrs()...)
	}

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("distributor: postgres: %w", err)
	}
	defer pool.Close()
	d.pool = pool

	admin, streams, err := d.startTopics(ctx)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ErrTopic) {
			return nil
		}
		return err
	}
	defer func() { _ = admin.Close() }()
	d.mu.Lock()
	d.streams = streams
	for _, s := range streams {
		for _, v := range s.cfg.Views {
			d.byView[v.Name] = s
		}
	}
	d.mu.Unlock()
	d.health.setPhase("running")
	wg.Go(func() { d.watchDeps(ctx, pool, admin, d.cfg.HealthInterval) })

	// The streams stop when Run stops them, after its shutdown line: on ctx's own end they
	// would race it, and their stop lines (producer closed, lock released) could come first.
	gctx, stopStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStreams()
	for _, g := range groupsOf(d, streams) {
		wg.Go(func() {
			if err := g.run(gctx); err != nil {
				errc <- err
			}
		})
	}
	var first error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down: stopping the streams (each aborts its open transaction, flushes and closes its producer, releases its lock)",
			"streams", len(streams))
	case first = <-errc:
		d.log.Error("distributor stopping", "err", first)
	}
	stopAt := time.Now()
	stopStreams()
	cancel()
	wg.Wait() // before the pool and the admin client close
	if first == nil {
		d.log.Info("every stream stopped", "took", time.Since(stopAt))
	}
	return first
}

// startTopics connects the Kafka admin client and checks every stream's topic (creating
// missing ones), retrying with backoff while Kafka does not answer, for at most
// Config.StartupTimeout. An unusable topic (ErrTopic) fails at once. It returns the admin
// client (for the health checks) and the streams.
func (d *Distributor) startTopics(ctx context.Context) (sarama.ClusterAdmin, []*stream, error) {
	deadline := time.Now().Add(d.cfg.StartupTimeout)
	for attempt := 0; ; attempt++ {
		admin, streams, err := d.checkTopics()
		if err == nil {
			if attempt > 0 {
				d.log.Info("start-up: Kafka answers", "attempts", attempt+1)
			}
			return admin, streams, nil
		}
		if errors.Is(err, ErrTopic) || ctx.Err() != nil {
			return nil, nil, err
		}
		if refusedByKafka(err) {
			return nil, nil, fmt.Errorf("%w (a refusal: not retried)", err)
		}
		wait := retryWait(attempt + 3) // at most 800ms first, doubling up to 30s
		if left := time.Until(deadline); left <= 0 {
			return nil, nil, fmt.Errorf("distributor: Kafka unreachable for startup_timeout (%s): %w", d.cfg.StartupTimeout, err)
		} else if wait > left {
			wait = left
		}
		d.log.Warn("start-up: Kafka does not answer; retrying", "err", err, "attempt", attempt+1, "retry_in", wait,
			"gives_up_in", time.Until(deadline).Round(time.Second))
		if !sleepCtx(ctx, wait) {
			return nil, nil, ctx.Err()
		}
	}
}

// refusedByKafka reports whether err is a refusal that retrying does not change: the
// broker's certificate does not verify, the broker refused ours (a TLS alert), or SASL
// authentication failed. Anything else (a broker not up yet, a connection reset) is
// retried.
func refusedByKafka(err error) bool {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		switch kerr {
		case sarama.ErrSASLAuthenticationFailed, sarama.ErrUnsupportedSASLMechanism, sarama.ErrIllegalSASLState,
			sarama.ErrClusterAuthorizationFailed, sarama.ErrTopicAuthorizationFailed:
			return true
		}
	}
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	return errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &host) || errors.As(err, &verify) ||
		(errors.As(err, &op) && op.Op == "remote error") // a TLS alert from the broker
}

// checkTopics is one try of startTopics.
func (d *Distributor) checkTopics() (sarama.ClusterAdmin, []*stream, error) {
	admin, err := sarama.NewClusterAdmin(d.cfg.Kafka.Brokers, d.cfg.Kafka.clientConfig("-admin"))
	if err != nil {
		return nil, nil, fmt.Errorf("distributor: kafka admin: %w", err)
	}
	streams := make([]*stream, 0, len(d.cfg.Streams))
	for i := range d.cfg.Streams {
		s := newStream(d, &d.cfg.Streams[i])
		if err := s.ensureTopic(admin); err != nil {
			_ = admin.Close()
			return nil, nil, err
		}
		streams = append(streams, s)
	}
	return admin, streams, nil
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
