package main

// Shared pieces of the distributor benchmarks (issue 2 §6): the servers from the
// environment, a throw-away database and topics, and running a distributor until ready.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/devenv"
	"github.com/statecast/statecast/kafkaconn"
)

type distEnv struct {
	adminDSN string
	dsn      string // the benchmark's own database
	db       string
	brokers  []string
	topics   []string
}

func distRandName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// newDistEnv creates a fresh database on $STATECAST_PG_DSN's server and reads the brokers.
func newDistEnv(ctx context.Context) (*distEnv, error) {
	admin, brokers := os.Getenv("STATECAST_PG_DSN"), os.Getenv("STATECAST_KAFKA_BROKERS")
	if admin == "" || brokers == "" {
		return nil, errors.New("STATECAST_PG_DSN and STATECAST_KAFKA_BROKERS must be set (make infra; set -a; . .run/env)")
	}
	e := &distEnv{adminDSN: admin, db: distRandName("bench"), brokers: strings.Split(brokers, ",")}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+e.db); err != nil {
		return nil, err
	}
	if e.dsn, err = devenv.DSNFor(admin, e.db); err != nil {
		return nil, err
	}
	return e, nil
}

// topic returns a fresh topic name; it is deleted by close (the distributor creates it).
func (e *distEnv) topic(prefix string) string {
	t := distRandName(prefix)
	e.topics = append(e.topics, t)
	return t
}

func (e *distEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, e.adminDSN); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)")
		_ = conn.Close(ctx)
	}
	if a, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("cachebench")); err == nil {
		for _, t := range e.topics {
			_ = a.DeleteTopic(t)
		}
		_ = a.Close()
	}
}

// runningDistributor is a distributor started by startDistributor.
type runningDistributor struct {
	d      *distributor.Distributor
	cancel context.CancelFunc
	done   chan error
}

// startDistributor runs a distributor with cfg and returns once it published its start-up
// epochs, with the time that took.
func startDistributor(ctx context.Context, cfg distributor.Config) (*runningDistributor, time.Duration, error) {
	d, err := distributor.New(cfg)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &runningDistributor{d: d, cancel: cancel, done: make(chan error, 1)}
	start := time.Now()
	go func() { r.done <- d.Run(ctx) }()
	ready := make(chan error, 1)
	go func() { ready <- d.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			cancel()
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

func (r *runningDistributor) stop() error {
	r.cancel()
	return <-r.done
}

// distEndOffset returns the end offset of partition 0 of topic.
func distEndOffset(brokers []string, topic string) (int64, error) {
	c, err := sarama.NewClient(brokers, kafkaconn.NewConfig("cachebench"))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.GetOffset(topic, 0, sarama.OffsetNewest)
}

// quantile of a sorted sample.
func distQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func distLatencyLine(name string, ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	f := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	return fmt.Sprintf("%-44s n=%-5d p50=%-9s p99=%-9s max=%s", name, len(s), f(distQuantile(s, .5)), f(distQuantile(s, .99)), f(distQuantile(s, 1)))
}
