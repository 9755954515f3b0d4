package player

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/internal/statuspage"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// Player serves streams to targets. Create it with New and run it with Run, which serves
// gRPC on Config.Listen and HTTP on Config.HTTPAddr when they are set; or serve gRPC on a
// listener of your own with Serve (in its own goroutine, before or after Run starts). Stop
// with Close.
type Player struct {
	cfg          Config
	log          *slog.Logger
	gather       prometheus.Gatherer // what /metrics serves; nil: not served
	metrics      *metrics
	streams      map[string]*stream
	streamNames  []string
	grpc         *grpc.Server
	health       *health.Server
	dispatchHook func(stream string, index int64, at time.Time)
	auth         *auth
	access       *access
	tls          *daemon.TLSFiles    // nil: plaintext (Config.Insecure)
	conns        *connTracker        // the connections of Serve's listeners
	limits       *principalLimits    // per-principal bounds
	admin        *daemon.AdminServer // nil: Config.Admin.Addr empty
	serveOnce    sync.Once           // the first Serve (or Run) starts the file watchers
	snapPinned   atomic.Int64        // bytes of snapshot rows not yet pushed (MaxSnapshotBytes)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running bool
	closed  bool

	// The player's state (state.go): Kafka answered at start-up (connectKafka), or why not
	// yet; gRPC health as last set and the channel that stateChanged closes on every change
	// (WaitReady). stateMu guards the last two; it is taken before any stream.mu.
	kafkaUp     atomic.Bool
	startErr    atomic.Pointer[string]
	stateMu     sync.Mutex
	healthState healthpb.HealthCheckResponse_ServingStatus
	changed     chan struct{}

	started time.Time           // New: the status page's uptime
	hist    *statuspage.History // the status page's charts
}

// Option configures a Player.
type Option func(*options)

type options struct {
	log      *slog.Logger
	reg      prometheus.Registerer
	dispatch func(stream string, index int64, at time.Time)
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the metrics with r (default: a registry of the Player's own).
// /metrics serves r when r is also a prometheus.Gatherer, as a *prometheus.Registry is;
// otherwise /metrics is not served, and the program that owns r exposes it.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithDispatchHook sets a function called by the main fetcher goroutine right after it
// dispatched the entry at index (to every subscribed target's queue) at time at. It must be
// fast and must not block; it is for benchmarks and tracing (dispatch → applied delays).
func WithDispatchHook(f func(stream string, index int64, at time.Time)) Option {
	return func(o *options) { o.dispatch = f }
}

// New validates a copy of cfg (Config.Validate) and returns a Player. It does not connect
// or listen: Run does.
func New(cfg Config, opts ...Option) (*Player, error) {
	cfg.Kafka.Brokers = slices.Clone(cfg.Kafka.Brokers)
	cfg.Streams = slices.Clone(cfg.Streams)
	cfg.Access = slices.Clone(cfg.Access)
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
	p := &Player{cfg: cfg, log: o.log, streams: map[string]*stream{}, dispatchHook: o.dispatch,
		access: &access{grants: cfg.Access}, started: time.Now(), hist: statuspage.NewHistory(),
		healthState: healthpb.HealthCheckResponse_NOT_SERVING, changed: make(chan struct{})}
	cfg.Kafka.LogWarnings(p.log)
	if err := p.loadSecurity(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p.gather, _ = o.reg.(prometheus.Gatherer)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.auth.done = p.ctx.Done()
	p.metrics = newMetrics(p)
	p.metrics.tokens.Add(p.auth.tokens)
	p.metrics.tokens.Add(p.adminTokens())
	if err := p.metrics.register(o.reg); err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
	}
	for _, sc := range cfg.Streams {
		p.streams[sc.Name] = newStream(p, sc)
		p.streamNames = append(p.streamNames, sc.Name)
	}
	p.grpc = grpc.NewServer(p.serverOptions()...)
	statecastv1.RegisterPlayerServer(p.grpc, &service{p: p})
	p.health = health.NewServer()
	p.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	p.health.SetServingStatus(statecastv1.Player_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(p.grpc, p.health)
	if cfg.Reflection {
		reflection.Register(p.grpc)
	}
	return p, nil
}

// loadSecurity loads the TLS files, the tokens and the admin endpoint's files.
func (p *Player) loadSecurity() error {
	c := &p.cfg
	p.conns = newConnTracker(c, p.log)
	p.limits = newPrincipalLimits(c)
	p.auth = &auth{log: p.log, conns: p.conns, failDelay: c.AuthFailureDelay, failures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "statecast", Subsystem: "player", Name: "auth_failures_total",
		Help: "gRPC calls whose authentication failed, by reason (bad_token, no_credentials, certificate_without_identity).",
	}, []string{"reason"})}
	var err error
	if c.TLS.Enabled() {
		if p.tls, err = daemon.LoadTLS(c.TLS.server(), "tls"); err != nil {
			return err
		}
		p.auth.mtls = p.tls.MutualTLS()
	}
	if c.Tokens.Enabled() {
		if p.auth.tokens, err = daemon.LoadTokens(c.Tokens.tokens(), "tokens"); err != nil {
			return err
		}
	}
	p.auth.open = p.auth.tokens == nil && !p.auth.mtls
	if c.Admin.Addr != "" {
		if p.admin, err = daemon.LoadAdmin(c.Admin.admin(), "admin", daemon.WithAdminLogger(p.log)); err != nil {
			return err
		}
	}
	return nil
}

// adminTokens are the admin endpoint's tokens (nil: none).
func (p *Player) adminTokens() *daemon.TokenSet {
	if p.admin == nil {
		return nil
	}
	return p.admin.Tokens()
}

// serverOptions are the gRPC server's: the codec, TLS, authentication, and the limits on
// what one connection may cost (streams, pings).
func (p *Player) serverOptions() []grpc.ServerOption {
	c := &p.cfg
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		grpc.MaxConcurrentStreams(c.MaxStreamsPerConn),
		// No grpc.ConnectionTimeout: the listener's bound on the first authenticated call
		// (connTracker, Config.AuthTimeout) starts at the accept, so it bounds the TLS
		// handshake too, and counts what it closes.
		grpc.MaxRecvMsgSize(c.MaxHelloBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: c.Keepalive.MinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: c.Keepalive.Time, Timeout: c.Keepalive.Timeout}),
		grpc.ChainStreamInterceptor(p.auth.authStream),
		grpc.ChainUnaryInterceptor(p.auth.authUnary),
	}
	if p.tls != nil {
		// With tokens too, a client certificate is the alternative to a token, not a must.
		opts = append(opts, grpc.Creds(coalescingCreds{credentials.NewTLS(p.tls.ServerConfig(p.auth.tokens == nil, "h2"))}))
	}
	return opts
}

// startServing runs once, at the first Serve or Run: it says how the gRPC server is
// secured and starts the goroutine that keeps the TLS and token files current (the admin
// endpoint's are Run's, daemon.Servers).
func (p *Player) startServing() {
	c := &p.cfg
	switch {
	case c.Insecure:
		p.log.Warn("gRPC is served in plaintext (insecure: true): anyone on the network can read the streams and, without tokens, subscribe to any of them",
			"tokens", p.auth.tokens != nil)
	default:
		p.log.Info("gRPC is served over TLS", "mutual_tls", p.auth.mtls, "tokens", p.auth.tokens != nil)
	}
	if p.auth.open {
		// TLS alone encrypts; it does not say who the client is.
		p.log.Warn("no client authentication (no tokens, no client CA): every client is the anonymous principal, and anyone who can reach the gRPC port may subscribe to every stream, over TLS too",
			"tls", p.tls != nil)
	}
	if len(c.Access) == 0 && !p.auth.open {
		p.log.Info("no access rules: every authenticated principal may read every stream and view")
	}
	var rs []daemon.Reloadable
	if p.tls != nil {
		rs = append(rs, p.tls)
	}
	if p.auth.tokens != nil {
		rs = append(rs, revokingTokens{TokenSet: p.auth.tokens, a: p.auth})
	}
	if len(rs) > 0 {
		p.goTracked(func() { daemon.Watch(p.ctx, c.ReloadInterval, p.log, rs...) })
	}
}

// goTracked runs f in a goroutine that Close waits for.
func (p *Player) goTracked(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// Run listens on Config.Listen (gRPC) and Config.HTTPAddr (Handler) when they are set and
// serves them from its start (/livez answers, /readyz says why the player is not ready
// yet), connects to Kafka — retrying with backoff for Config.StartupTimeout while it does
// not answer (connectKafka) — and runs every stream (stream.run) until ctx ends or Close
// is called (nil), or a server fails or Kafka did not answer within the start-up timeout
// (its error). A stream whose topic cannot be served is unavailable alone and tried again;
// the others serve. Health is SERVING while the player is ready (Readiness). When Run
// returns, its targets have ended and the servers it started are stopped (gRPC gracefully
// within Config.ShutdownGrace); Close still releases the rest. Run may be called once.
func (p *Player) Run(ctx context.Context) (err error) {
	p.mu.Lock()
	if p.closed || p.running {
		p.mu.Unlock()
		return ErrClosed
	}
	p.running = true
	p.wg.Add(1) // Close waits for Run's fetchers.
	p.mu.Unlock()
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()

	var lis net.Listener
	if p.cfg.Listen != "" {
		if lis, err = net.Listen("tcp", p.cfg.Listen); err != nil {
			return fmt.Errorf("player: listen: %w", err)
		}
		defer lis.Close() // when Run fails before serving
	}
	srv, err := daemon.ListenServers(p.cfg.HTTPAddr, p.Handler, p.admin, p.AdminHandler)
	if err != nil {
		return fmt.Errorf("player: %w", err)
	}
	defer srv.Close()
	// The file watchers (certificates, tokens) and the start-up log, also when Run serves
	// only HTTP.
	p.serveOnce.Do(p.startServing)

	errs := make(chan error, 3)
	var servers sync.WaitGroup
	if lis != nil {
		servers.Go(func() {
			if err := p.Serve(lis); err != nil {
				errs <- fmt.Errorf("player: grpc: %w", err)
				cancel()
			}
		})
	}
	servers.Go(func() {
		if err := srv.Serve(ctx, p.cfg.ReloadInterval, p.log); err != nil {
			errs <- fmt.Errorf("player: %w", err)
			cancel()
		}
	})
	if lis != nil || srv.Listening() {
		var grpcAddr string
		if lis != nil {
			grpcAddr = lis.Addr().String()
		}
		p.log.Info("player listening", append([]any{"grpc", grpcAddr}, srv.Attrs()...)...)
	}
	var wg sync.WaitGroup
	if err = p.connectKafka(ctx); err == nil && ctx.Err() == nil {
		for _, name := range p.streamNames {
			s := p.streams[name]
			wg.Go(func() { s.run(ctx) })
			wg.Go(func() { s.progressLoop(ctx) })
		}
		<-ctx.Done()
	}
	cancel()
	stopAt := time.Now()
	targets := 0
	for _, name := range p.streamNames {
		targets += len(p.streams[name].targetsSnapshot())
	}
	p.log.Info("shutting down: stopping the fetchers, then the targets (each resumes at another player from its last acknowledged index) and the gRPC server",
		"streams", len(p.streamNames), "targets", targets)
	wg.Wait()
	p.health.Shutdown()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	// Targets cannot be served without the fetchers: end them, then the clients.
	p.cancel()
	for _, name := range p.streamNames {
		p.streams[name].close()
	}
	if lis != nil {
		graceful := p.stopGRPC()
		p.log.Info("gRPC server stopped", "graceful", graceful, "grace", p.cfg.ShutdownGrace)
	}
	servers.Wait()
	p.log.Info("every stream and target stopped", "took", time.Since(stopAt))
	return err
}

// WaitReady blocks until the player is ready (Readiness: Kafka answered, every stream's
// materialized copy caught up or its topic was found unusable, at least one stream
// serves), ctx ends, or the player is closed (ErrClosed).
func (p *Player) WaitReady(ctx context.Context) error {
	for {
		p.stateMu.Lock()
		changed := p.changed
		p.stateMu.Unlock()
		if p.Readiness().Ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
}

// Serve serves the gRPC API (Player, health, reflection when enabled) on lis until Close
// (or until Run returns, when Run serves Config.Listen), with the TLS and authentication
// of the Config. Subscribe calls wait for their stream to be ready. Run calls it for
// Config.Listen; call it yourself to serve a listener of your own.
func (p *Player) Serve(lis net.Listener) error {
	p.serveOnce.Do(p.startServing)
	err := p.grpc.Serve(p.conns.listener(lis))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GRPCServer exposes the underlying server, e.g. to register more services before Serve.
func (p *Player) GRPCServer() *grpc.Server { return p.grpc }

// Close stops everything: targets end with Unavailable, the gRPC server stops (gracefully
// within Config.ShutdownGrace), fetchers stop, and Close waits for every goroutine.
func (p *Player) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.health.Shutdown()
	p.cancel()
	for _, s := range p.streams {
		for _, t := range s.targetsSnapshot() {
			t.suspend(ErrClosed)
		}
	}
	p.stopGRPC()
	p.wg.Wait()
	return nil
}

// stopGRPC stops the gRPC server: gracefully within Config.ShutdownGrace, then at once
// (false).
func (p *Player) stopGRPC() (graceful bool) {
	done := make(chan struct{})
	go func() {
		p.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(p.cfg.ShutdownGrace):
		p.grpc.Stop()
		<-done
		return false
	}
}

// AdminHandler serves what Run serves on Config.Admin.Addr (behind its tokens when set):
//
//	GET /status        the status page (StatusHandler): HTML for a browser, else JSON
//	GET /status.json   the same JSON, whatever the Accept header
//
// The page shows each target's principal, service and instance id: keep it off the
// network, or behind tokens.
func (p *Player) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /status", p.StatusHandler())
	mux.Handle("GET /status.json", p.StatusHandler())
	return mux
}

// Handler serves what Run serves on Config.HTTPAddr, the read-only endpoint:
//
//	GET /livez         200 while the process serves: restart it when this fails
//	GET /readyz        200 while the player is ready (Readiness, as gRPC health SERVING):
//	                   Kafka answered at start-up, no stream is still loading its copy for
//	                   the first time, and at least one stream is ready; 503 otherwise and
//	                   once shutdown began. JSON Readiness: {"ready":bool,"kafka":{"ok",
//	                   "error"},"streams":{name:state},"errors":{name:cause}}: a stream that
//	                   cannot be served is named there without making the others unready
//	GET /healthz       the same as /livez, with {"streams":{name:state},"errors":{…}}
//	GET /metrics       Prometheus metrics (see WithRegisterer)
func (p *Player) Handler() http.Handler {
	mux := http.NewServeMux()
	if p.gather != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(p.gather, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := p.Readiness()
		var body any = rd
		// A refused tokens file is loud: the player serves only what it kept of the
		// tokens (daemon.TokenSet.Reload) until the file is fixed. The reason is in the
		// log; this endpoint answers anyone, so it names neither the file nor the line.
		// gRPC health is left as Readiness says: clients still connect.
		if p.auth.tokens != nil && p.auth.tokens.Err() != nil {
			rd.Ready = false
			body = struct {
				Readiness
				Tokens string `json:"tokens"`
			}{rd, "refused: the tokens file does not load (see the log)"}
		}
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"live":true}` + "\n"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		rd := p.Readiness()
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"streams": rd.Streams}
		if rd.Errors != nil {
			body["errors"] = rd.Errors
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}
