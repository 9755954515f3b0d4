package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
)

// DistEnv is a distributor benchmark's environment: a fresh database on the server of
// $STATECAST_PG_DSN with a connection to it, the brokers, and the topics to delete at the
// end.
type DistEnv struct {
	DSN     string // the benchmark's own database
	Conn    *pgx.Conn
	Brokers []string

	adminDSN string
	db       string
	topics   []string
}

// NewDistEnv parses the command line (Args.Parse), creates the database, connects to it
// and runs schema (may be empty) there.
func NewDistEnv(ctx context.Context, args *Args, schema string) (*DistEnv, error) {
	brokers, err := args.Parse()
	if err != nil {
		return nil, err
	}
	admin := os.Getenv("STATECAST_PG_DSN")
	if admin == "" {
		return nil, errors.New("STATECAST_PG_DSN must be set (make infra; set -a; . .run/env)")
	}
	e := &DistEnv{adminDSN: admin, db: UniqueName("bench"), Brokers: brokers}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+e.db)
	_ = conn.Close(context.Background())
	if err != nil {
		return nil, err
	}
	if e.DSN, err = demo.DSN(admin, e.db); err == nil {
		e.Conn, err = pgx.Connect(ctx, e.DSN)
	}
	if err == nil && schema != "" {
		_, err = e.Conn.Exec(ctx, schema)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Topic returns a fresh topic name, deleted by Close (the distributor creates it).
func (e *DistEnv) Topic(prefix string) string {
	t := UniqueName(prefix)
	e.topics = append(e.topics, t)
	return t
}

// CreateTopic creates a fresh compacted topic with one partition, deleted by Close.
func (e *DistEnv) CreateTopic(prefix string) (string, error) {
	t := e.Topic(prefix)
	return t, createTopic(e.Brokers, t)
}

// DB is the name of the benchmark's database.
func (e *DistEnv) DB() string { return e.db }

// Close drops the database's replication slots (a wal stream's, a floor's), the database
// and the topics.
func (e *DistEnv) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.Conn != nil {
		_ = e.Conn.Close(ctx)
	}
	if conn, err := pgx.Connect(ctx, e.adminDSN); err == nil {
		// A database whose slot is in use cannot be dropped, and a slot left behind
		// keeps the server's WAL forever: end its walsender and drop it first.
		_ = DropSlots(ctx, conn, e.db)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)")
		_ = conn.Close(ctx)
	}
	deleteTopics(e.Brokers, e.topics...)
}

// Distributor is a distributor started by StartDistributor.
type Distributor struct {
	D      *distributor.Distributor
	cancel context.CancelFunc
	done   chan error
}

// StartDistributor runs a distributor with cfg and opts and returns once it published its
// start-up epochs, with the time that took (Run → WaitReady).
func StartDistributor(ctx context.Context, cfg distributor.Config, opts ...distributor.Option) (*Distributor, time.Duration, error) {
	d, err := distributor.New(cfg, opts...)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Distributor{D: d, cancel: cancel, done: make(chan error, 1)}
	start := time.Now()
	go func() { r.done <- d.Run(ctx) }()
	ready := make(chan error, 1)
	go func() { ready <- d.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			<-r.done
			return nil, 0, err
		}
	case err := <-r.done:
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, 0, fmt.Errorf("distributor stopped before it was ready: %w", err)
	}
	return r, time.Since(start), nil
}

// stopTimeout bounds Stop: a distributor that does not stop must not keep a benchmark
// from dropping its slot and database.
const stopTimeout = 30 * time.Second

// Stop stops the distributor and returns what Run returned, or an error when Run has not
// returned within stopTimeout.
func (r *Distributor) Stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(stopTimeout):
		return fmt.Errorf("bench: the distributor did not stop within %v", stopTimeout)
	}
}
