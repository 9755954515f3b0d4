package player

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// Player serves streams to targets. Create it with New, run the fetchers with Run and
// the gRPC server with Serve (in either order, each in its own goroutine), stop with Close.
type Player struct {
	cfg          Config
	log          *slog.Logger
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

// WithRegisterer registers the player's metrics (default: not registered).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithDispatchHook sets a function called by the main fetcher goroutine right after it
// dispatched the entry at index (to every subscribed target's queue) at time at. It must be
// fast and must not block; it is for benchmarks and tracing (dispatch → applied delays).
func WithDispatchHook(f func(stream string, index int64, at time.Time)) Option {
	return func(o *options) { o.dispatch = f }
}

// New validates cfg (applying defaults) and returns a Player. It does not connect.
func New(cfg Config, opts ...Option) (*Player, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	p := &Player{cfg: cfg, log: o.log, streams: map[string]*stream{}, dispatchHook: o.dispatch}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.metrics = newMetrics(p)
	if o.reg != nil {
		if err := p.metrics.register(o.reg); err != nil {
			return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
		}
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

// Run connects to Kafka, starts one main fetcher per stream and blocks until ctx ends,
// Close is called, or a stream fails (its error is returned). Health turns SERVING when
// every stream's materialized copy has caught up.
func (p *Player) Run(ctx context.Context) error {
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

	for _, name := range p.streamNames {
		if err := p.streams[name].connect(); err != nil {
			for _, n := range p.streamNames {
				p.streams[n].close()
			}
			return err
		}
	}
	errs := make(chan error, len(p.streamNames))
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
	var err error
	select {
	case err = <-errs:
	default:
	}
	// Targets cannot be served without the fetchers: end them, then the clients.
	p.cancel()
	for _, name := range p.streamNames {
		p.streams[name].close()
	}
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

// Serve serves the gRPC API (Player, health, reflection) on lis until Close.
// Subscribe calls wait for their stream to be ready.
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
	p.wg.Wait()
	return nil
}
