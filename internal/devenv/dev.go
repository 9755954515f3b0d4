package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/deploy/demo"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/kafkautil"
	"github.com/statecast/statecast/schemas/record"
)

// DevOptions configures Dev.
type DevOptions struct {
	// AdminDSN is a DSN of the local PostgreSQL server; the demo database is created there.
	AdminDSN string
	// Brokers of an external Kafka; empty starts the embedded broker (kfake).
	Brokers []string
	// Out receives the records and the demo's narration.
	Out io.Writer
	// Log receives the distributor's logs (nil: discarded).
	Log *slog.Logger
	// Duration the demo runs after the first epochs are published; 0 runs until ctx ends.
	Duration time.Duration
	// Step is the pause between scripted database changes (default 1s).
	Step time.Duration
	// MaxValue cuts printed values (0: never).
	MaxValue int
	// ShowPolls prints poll records too (they come every poll interval per view).
	ShowPolls bool
	// Database is the demo database's name (default DemoDatabase).
	Database string
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Dev runs the demo: it seeds the demo database, starts the embedded broker (unless
// Brokers is set), runs the distributor with deploy/demo/distributor.yaml, prints every
// record of the stream, applies the scripted changes one per Step, and stops after
// Duration (or when ctx ends). It returns the distributor's error if it failed.
func Dev(ctx context.Context, o DevOptions) error {
	if o.Step <= 0 {
		o.Step = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	out := &lockedWriter{w: o.Out}
	say := func(format string, a ...any) { fmt.Fprintf(out, "-- "+format+"\n", a...) }

	if o.Database == "" {
		o.Database = DemoDatabase
	}
	dsn, err := SeedDemo(ctx, o.AdminDSN, o.Database)
	if err != nil {
		return err
	}
	say("seeded database %s from deploy/demo/schema.sql", o.Database)

	cfg, err := distributor.ParseConfig(demo.DistributorYAML)
	if err != nil {
		return fmt.Errorf("devenv: deploy/demo/distributor.yaml: %w", err)
	}
	cfg.Postgres.DSN = dsn
	brokers := o.Brokers
	if len(brokers) == 0 {
		b, err := StartBroker(0)
		if err != nil {
			return err
		}
		defer b.Close()
		brokers = b.Addrs()
		say("embedded Kafka (kfake) listening on %v", brokers)
	} else {
		// A shared broker may hold an older demo stream: publish into a fresh topic.
		cfg.Streams[0].Topic = fmt.Sprintf("%s-%d", demo.Topic, time.Now().UnixNano())
		say("external Kafka %v", brokers)
	}
	cfg.Kafka.Brokers = brokers
	topic := cfg.Streams[0].Topic

	d, err := distributor.New(*cfg, distributor.WithLogger(o.Log))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- d.Run(ctx)
		cancel()
	})
	if err := d.WaitReady(ctx); err != nil {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			return err
		}
		return err
	}
	say("distributor published the first epochs of %v into topic %s:", d.Views(), topic)
	if !o.ShowPolls {
		say("(poll records are not shown; -polls shows them)")
	}
	p := Printer{W: out, MaxValue: o.MaxValue}
	var seen atomic.Int64 // offset+1 of the last record the tail read
	print := func(r Record) error {
		seen.Store(r.Offset + 1)
		if r.Meta.Kind == record.KindPoll && !o.ShowPolls {
			return nil
		}
		return p.Print(r)
	}
	tailErr := make(chan error, 1)
	wg.Go(func() {
		tailErr <- Tail(ctx, TailOptions{Brokers: brokers, Topic: topic, From: sarama.OffsetOldest, Follow: true}, print)
	})

	err = script(ctx, d, dsn, o, say)
	if err == nil {
		err = waitTail(ctx, brokers, topic, &seen)
	}
	if o.Duration > 0 && err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(max(0, o.Duration-time.Duration(len(demoChanges))*o.Step)):
		}
	} else if err == nil {
		<-ctx.Done()
	}
	cancel()
	wg.Wait()
	if rerr := <-runErr; rerr != nil {
		return rerr
	}
	if terr := <-tailErr; terr != nil {
		return terr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	say("done")
	return nil
}

// script applies the scripted changes, one per Step.
func script(ctx context.Context, d *distributor.Distributor, dsn string, o DevOptions, say func(string, ...any)) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("devenv: connect to the demo database: %w", err)
	}
	defer conn.Close(context.Background())
	for _, c := range demoChanges {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Step):
		}
		say("change: %s", c.what)
		if err := applyChange(ctx, conn, c); err != nil {
			return err
		}
		for _, v := range c.reconcile {
			say("reconcile of view %s requested", v)
			if err := d.Reconcile(ctx, v); err != nil {
				return fmt.Errorf("devenv: reconcile %s: %w", v, err)
			}
		}
	}
	return nil
}

// waitTail returns once the tail has read every record the topic holds now.
func waitTail(ctx context.Context, brokers []string, topic string, seen *atomic.Int64) error {
	client, err := sarama.NewClient(brokers, kafkautil.NewConfig("statecast-dev"))
	if err != nil {
		return fmt.Errorf("devenv: kafka: %w", err)
	}
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	_ = client.Close()
	if err != nil {
		return fmt.Errorf("devenv: end offset of %s: %w", topic, err)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for seen.Load() < end {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
