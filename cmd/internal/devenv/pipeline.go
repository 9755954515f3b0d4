package devenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/examples/sportsbook"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
)

// StreamName is the name the demo player serves the stream under (Hello.stream).
const StreamName = "sportsbook"

// listen listens on addr; if addr is taken it falls back to a free port on the same host
// (the second result says so).
func listen(addr string) (net.Listener, bool, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err == nil {
		return lis, false, nil
	}
	host, _, serr := net.SplitHostPort(addr)
	if serr != nil {
		return nil, false, fmt.Errorf("devenv: listen on %s: %w", addr, err)
	}
	lis, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, false, fmt.Errorf("devenv: listen on %s: %w", addr, errors.Join(err, err2))
	}
	return lis, true, nil
}

// runningPlayer is an in-process player serving gRPC.
type runningPlayer struct {
	p    *player.Player
	addr string
	wg   sync.WaitGroup
	err  error // Run's error, valid after stop
}

// startPlayer starts a player of topic (stream StreamName) on addr and waits until its
// materialized copy caught up with the topic.
func startPlayer(ctx context.Context, brokers []string, topic, addr string, log *slog.Logger) (*runningPlayer, bool, error) {
	p, err := player.New(player.Config{
		Insecure: true, // the demo's player serves loopback only
		Kafka:    kafkaconn.Config{Brokers: brokers, ClientID: "statecast-dev-player"},
		Streams:  []player.StreamConfig{{Name: StreamName, Topic: topic}}, ShutdownGrace: time.Second,
	}, player.WithLogger(log))
	if err != nil {
		return nil, false, err
	}
	lis, moved, err := listen(addr)
	if err != nil {
		_ = p.Close()
		return nil, false, err
	}
	rp := &runningPlayer{p: p, addr: lis.Addr().String()}
	rp.wg.Go(func() { rp.err = p.Run(ctx) })
	rp.wg.Go(func() { _ = p.Serve(lis) })
	if err := p.WaitReady(ctx); err != nil {
		rp.stop()
		return nil, false, fmt.Errorf("devenv: player not ready: %w", errors.Join(err, rp.err))
	}
	return rp, moved, nil
}

// stop closes the player and waits for its goroutines; it returns Run's error.
func (rp *runningPlayer) stop() error {
	_ = rp.p.Close()
	rp.wg.Wait()
	if errors.Is(rp.err, context.Canceled) {
		return nil
	}
	return rp.err
}

// runningService is the sportsbook example service: cacheclient subscribed to the
// player, its HTTP API on a local port, its write endpoints on the demo database.
type runningService struct {
	s    *sportsbook.Service
	url  string
	srv  *http.Server
	pool *pgxpool.Pool
	wg   sync.WaitGroup
}

// startService starts the sportsbook service against the player at playerAddr and the
// database dsn (its write endpoints), serves its HTTP API on httpAddr and waits until the
// cache holds its initial snapshot.
func startService(ctx context.Context, playerAddr, httpAddr, dsn string, log *slog.Logger) (*runningService, bool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, false, fmt.Errorf("devenv: sportsbook database: %w", err)
	}
	s, err := sportsbook.New(sportsbook.Config{
		Client: cacheclient.Config{Addresses: []string{playerAddr}, Stream: StreamName, Service: "sportsbook-demo"},
		DB:     pool,
	}, log)
	if err != nil {
		pool.Close()
		return nil, false, err
	}
	lis, moved, err := listen(httpAddr)
	if err != nil {
		pool.Close()
		return nil, false, err
	}
	if err := s.Client.Start(); err != nil {
		_ = lis.Close()
		pool.Close()
		return nil, false, err
	}
	rs := &runningService{s: s, url: "http://" + lis.Addr().String(), srv: &http.Server{Handler: s.Handler()}, pool: pool}
	rs.wg.Go(func() { _ = rs.srv.Serve(lis) })
	if err := s.Client.WaitReady(ctx); err != nil {
		_ = rs.stop()
		return nil, false, fmt.Errorf("devenv: sportsbook cache not ready: %w", err)
	}
	return rs, moved, nil
}

// stop shuts the HTTP server down and closes the cache client.
func (rs *runningService) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	herr := rs.srv.Shutdown(ctx)
	rs.wg.Wait()
	cerr := rs.s.Client.Close()
	rs.pool.Close()
	return errors.Join(herr, cerr)
}
