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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/statecast/statecast/internal/daemon"
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

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running bool
	closed  bool
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
	cfg.Brokers = slices.Clone(cfg.Brokers)
	cfg.Streams = slices.Clone(cfg.Streams)
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
	p := &Player{cfg: cfg, log: o.log, streams: map[string]*stream{}, dispatchHook: o.dispatch}
	p.gather, _ = o.reg.(prometheus.Gatherer)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.metrics = newMetrics(p)
	if err := p.metrics.register(o.reg); err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
	}
	for _, sc := range cfg.Streams {
		p.streams[sc.Name] = newStream(p, sc)
		p.streamNames = append(p.streamNames, sc.Name)
	}
	p.grpc = grpc.NewServer(grpc.ForceServerCodecV2(newCodec()))
	statecastv1.RegisterPlayerServer(p.grpc, &service{p: p})
	p.health = health.NewServer()
	p.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	p.health.SetServingStatus(statecastv1.Player_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(p.grpc, p.health)
	reflection.Register(p.grpc)
	return p, nil
}

// goTracked runs f in a goroutine that Close waits for.
func (p *Player) goTracked(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// Run listens on Config.Listen (gRPC) and Config.HTTPAddr (Handler) when they are set,
// connects to Kafka, starts one main fetcher per stream and serves until ctx ends, Close is
// called, or a stream or a server fails (its error is returned). Health turns SERVING when
// every stream's materialized copy has caught up. When Run returns, its targets have ended
// and the servers it started are stopped (gRPC gracefully within Config.ShutdownGrace);
// Close still releases the rest. Run may be called once.
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
	var hs *daemon.HTTPServer
	if p.cfg.Listen != "" {
		if lis, err = net.Listen("tcp", p.cfg.Listen); err != nil {
			return fmt.Errorf("player: listen: %w", err)
		}
		defer lis.Close() // when Run fails before serving
	}
	if p.cfg.HTTPAddr != "" {
		if hs, err = daemon.ListenHTTP(p.cfg.HTTPAddr, p.Handler()); err != nil {
			return fmt.Errorf("player: %w", err)
		}
		defer hs.Close()
	}

	for _, name := range p.streamNames {
		if err := p.streams[name].connect(); err != nil {
			for _, n := range p.streamNames {
				p.streams[n].close()
			}
			return err
		}
	}
	errs := make(chan error, len(p.streamNames)+2)
	var servers sync.WaitGroup
	if lis != nil {
		servers.Go(func() {
			if err := p.Serve(lis); err != nil {
				errs <- fmt.Errorf("player: grpc: %w", err)
				cancel()
			}
		})
	}
	if hs != nil {
		servers.Go(func() {
			if err := hs.Serve(ctx); err != nil {
				errs <- fmt.Errorf("player: %w", err)
				cancel()
			}
		})
	}
	if lis != nil || hs != nil {
		var grpcAddr, httpAddr string
		if lis != nil {
			grpcAddr = lis.Addr().String()
		}
		if hs != nil {
			httpAddr = hs.Addr().String()
		}
		p.log.Info("player listening", "grpc", grpcAddr, "http", httpAddr)
	}
	var wg sync.WaitGroup
	for _, name := range p.streamNames {
		s := p.streams[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.run(ctx); err != nil {
				s.log.Error("main fetcher stopped", "err", err)
				errs <- err
				cancel()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.progressLoop(ctx)
		}()
	}
	go func() {
		if p.WaitReady(ctx) == nil {
			p.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			p.health.SetServingStatus(statecastv1.Player_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		}
	}()
	<-ctx.Done()
	wg.Wait()
	p.health.Shutdown()
	select {
	case err = <-errs:
	default:
	}
	// Targets cannot be served without the fetchers: end them, then the clients.
	p.cancel()
	for _, name := range p.streamNames {
		p.streams[name].close()
	}
	if lis != nil {
		p.stopGRPC()
	}
	servers.Wait()
	return err
}

// WaitReady blocks until every stream's materialized copy has caught up with the log.
func (p *Player) WaitReady(ctx context.Context) error {
	for _, name := range p.streamNames {
		select {
		case <-p.streams[name].ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
	return nil
}

// Serve serves the gRPC API (Player, health, reflection) on lis until Close (or until Run
// returns, when Run serves Config.Listen). Subscribe calls wait for their stream to be
// ready. Run calls it for Config.Listen; call it yourself to serve a listener of your own.
func (p *Player) Serve(lis net.Listener) error {
	err := p.grpc.Serve(lis)
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

// stopGRPC stops the gRPC server: gracefully within Config.ShutdownGrace, then at once.
func (p *Player) stopGRPC() {
	done := make(chan struct{})
	go func() {
		p.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(p.cfg.ShutdownGrace):
		p.grpc.Stop()
		<-done
	}
}

// Handler serves what Run serves on Config.HTTPAddr:
//
//	GET /healthz       200 with {"streams":{name:"ready"|"starting"}} (ready: its materialized copy caught up)
//	GET /metrics       Prometheus metrics (see WithRegisterer)
//	GET /status        the status page (StatusHandler): HTML, or JSON at /status.json
func (p *Player) Handler() http.Handler {
	mux := http.NewServeMux()
	if p.gather != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(p.gather, promhttp.HandlerOpts{}))
	}
	mux.Handle("GET /status", p.StatusHandler())
	mux.Handle("GET /status.json", p.StatusHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		st := make(map[string]string, len(p.streamNames))
		for _, name := range p.streamNames {
			st[name] = "starting"
			select {
			case <-p.streams[name].ready:
				st[name] = "ready"
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"streams": st})
	})
	return mux
}
