package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
)

// DevOptions configures Dev.
type DevOptions struct {
	// AdminDSN is a DSN of the local PostgreSQL server; the demo database is created there.
	AdminDSN string
	// Brokers of an external Kafka; empty starts the embedded broker (kfake).
	Brokers []string
	// Out receives the records and the demo's narration.
	Out io.Writer
	// Log receives the distributor's and the player's logs (nil: discarded).
	Log *slog.Logger
	// Duration the demo keeps serving after the script and the convergence check, for
	// manual curl; 0 serves until ctx ends.
	Duration time.Duration
	// Step is the pause between scripted database changes (default 1s).
	Step time.Duration
	// MaxValue cuts printed values (0: never).
	MaxValue int
	// ShowIdle prints every position record, the idle ones too (an idle stream gets one
	// whenever the database's WAL moves, up to every 100ms); by default only those that
	// end a source transaction.
	ShowIdle bool
	// ShowSnapshot prints the rows of the start-up epochs too (otherwise only their
	// control records and a count).
	ShowSnapshot bool
	// Database is the demo database's name (default demo.Database).
	Database string
	// GRPCAddr is where the player serves gRPC, HTTPAddr where the sportsbook service
	// serves HTTP (default 127.0.0.1:0 for both; a taken port falls back to a free one).
	GRPCAddr, HTTPAddr string
	// StatusAddr is where the status pages of the distributor, the player and the service's
	// cache are served (/distributor/status, /player/status, /cache/status; default
	// 127.0.0.1:0, a taken port falling back to a free one).
	StatusAddr string
	// CheckTimeout bounds the wait for each change to reach the cache and for the
	// convergence check (default 30s).
	CheckTimeout time.Duration
	// OnServing, when set, is called with the service's base URL once the script and the
	// convergence check are done, before the Duration wait (tests query the live service).
	OnServing func(ctx context.Context, baseURL string)

	// beforeConverge, when set, runs on the demo database just before the convergence
	// check (tests stop the distributor and make the cache diverge).
	beforeConverge func(ctx context.Context, conn *pgx.Conn, stopDistributor func()) error
	// configure, when set, adjusts the distributor config (tests).
	configure func(cfg *distributor.Config)
}

// ErrCheckFailed is returned by Dev when a change did not reach the cache in time or the
// cache did not converge to PostgreSQL; the output says what differs.
var ErrCheckFailed = errors.New("devenv: demo check failed")

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Dev runs the demo, the main job of statecast end to end on embedded defaults: it seeds
// the demo database, starts the embedded broker (unless Brokers is set), runs the
// distributor with examples/sportsbook/demo/distributor.yaml (capturing the WAL through a replication
// slot named after the database), an in-process player serving gRPC and the sportsbook
// example service (cacheclient) serving HTTP; it prints the stream's records, applies the
// scripted changes one per Step and, for each, waits with WaitFor for the WAL position
// read after its COMMIT and shows the records published and what the service's cache
// then answers; it asks the service for a read-your-writes request (a write answered from
// the cache); it ends with a convergence check (every cached view and index equals its
// SQL query), keeps serving for Duration (or until ctx ends) and shuts everything down,
// dropping the replication slot. It returns the first component error, or
// ErrCheckFailed.
func Dev(ctx context.Context, o DevOptions) (err error) {
	if o.Step <= 0 {
		o.Step = time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Database == "" {
		o.Database = demo.Database
	}
	out := &lockedWriter{w: o.Out}
	say := func(format string, a ...any) { fmt.Fprintf(out, "-- "+format+"\n", a...) }

	dsn, err := demo.Seed(ctx, o.AdminDSN, o.Database)
	if err != nil {
		return err
	}
	say("seeded database %s from examples/sportsbook/demo/schema.sql", o.Database)

	cfg, err := distributor.ParseConfig(demo.DistributorYAML)
	if err != nil {
		return fmt.Errorf("devenv: examples/sportsbook/demo/distributor.yaml: %w", err)
	}
	cfg.Postgres.DSN = dsn
	cfg.Streams[0].Slot = demo.SlotName(o.Database)
	brokers := o.Brokers
	var b *Broker
	if len(brokers) == 0 {
		if b, err = StartBroker(0); err != nil {
			return err
		}
		brokers = b.Addrs()
		say("embedded Kafka (kfake) listening on %v", brokers)
	} else {
		// A shared broker may hold an older demo stream: publish into a fresh topic.
		cfg.Streams[0].Topic = fmt.Sprintf("%s-%d", demo.Topic, time.Now().UnixNano())
		say("external Kafka %v", brokers)
	}
	cfg.Kafka.Brokers = brokers
	if o.configure != nil {
		o.configure(cfg)
	}
	r := &run{o: o, out: out, say: say, brokers: brokers, topic: cfg.Streams[0].Topic, dsn: dsn, adminDSN: o.AdminDSN}
	err = r.main(ctx, cfg)
	if b != nil {
		b.Close()
		say("embedded Kafka stopped")
	}
	if err == nil {
		say("done")
	}
	return err
}
