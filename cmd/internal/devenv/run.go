package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cacheclient/cachestatus"
	"github.com/statecast/statecast/cmd/internal/ctl"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// run is one demo run once the database and the broker are there.
type run struct {
	o        DevOptions
	out      io.Writer
	say      func(string, ...any)
	brokers  []string
	topic    string
	dsn      string // the demo database
	adminDSN string // the server (to drop the demo's replication slot)

	seen   atomic.Int64 // offset+1 of the last record the tail read
	hidden atomic.Int64 // snapshot rows not printed
	epochs atomic.Int64 // epoch-begin records after the start-up epochs (reconciles)
	sink   logSink      // the sportsbook service's logs
	failed []string     // checks that failed

	stopDist func() error // stops the distributor (idempotent)
	stopped  []stopper    // components to stop, in start order
}

type stopper struct {
	name string
	stop func() error
	done string // what shutdown says once stop succeeded ("" : "<name> stopped")
}

const logPrefix = "   [sportsbook log] "

func (r *run) main(ctx context.Context, cfg *distributor.Config) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		serr := r.shutdown()
		switch {
		case serr == nil:
		case err == nil || errors.Is(err, context.Canceled):
			// A failed component cancels the demo: its error is the one to report.
			err = serr
		default:
			err = errors.Join(err, serr)
		}
	}()

	d, err := distributor.New(*cfg, distributor.WithLogger(r.o.Log))
	if err != nil {
		return err
	}
	pages := newStatusPages()
	pages.mount("/distributor", d.AdminHandler())
	// The slot outlives the distributor: dropped once it stopped (stoppers run in reverse).
	slot := cfg.Streams[0].Slot
	r.stopped = append(r.stopped, stopper{name: "replication slot " + slot, stop: r.dropSlot,
		done: fmt.Sprintf("replication slot %s dropped (a slot left behind keeps PostgreSQL from recycling WAL)", slot)})
	distCtx, stopDist := context.WithCancel(ctx)
	var distWG sync.WaitGroup
	var distErr error
	distWG.Go(func() {
		distErr = d.Run(distCtx)
		if distCtx.Err() == nil {
			cancel() // a failed distributor ends the demo
		}
	})
	r.stopDist = sync.OnceValue(func() error {
		stopDist()
		distWG.Wait()
		if errors.Is(distErr, context.Canceled) {
			return nil
		}
		return distErr
	})
	r.stopped = append(r.stopped, stopper{name: "distributor", stop: r.stopDist})
	if err := d.WaitReady(ctx); err != nil {
		return err
	}
	readyEnd, err := endOffset(r.brokers, r.topic)
	if err != nil {
		return err
	}
	r.say("distributor captures the WAL of database %s (replication slot %s, publication %s); how each table's changes reach the views:",
		r.o.Database, slot, cfg.Streams[0].Publication)
	for _, st := range d.Status() {
		for _, v := range st.Views {
			for i, dep := range v.Dependencies {
				name := ""
				if i == 0 {
					name = v.Name
				}
				fmt.Fprintf(r.out, "   %-14s %s\n", name, dep)
			}
		}
	}
	r.say("distributor published the first epochs of %v into topic %s (offsets 0..%d)", d.Views(), r.topic, readyEnd-1)
	if err := r.startTail(ctx, readyEnd); err != nil {
		return err
	}
	if err := r.waitTail(ctx); err != nil {
		return err
	}
	if !r.o.ShowSnapshot {
		r.say("(%d snapshot rows not shown: -snapshot shows them; idle position records neither: -idle)", r.hidden.Load())
	}

	pl, moved, err := startPlayer(ctx, r.brokers, r.topic, r.o.GRPCAddr, r.o.Log)
	if err != nil {
		return err
	}
	r.stopped = append(r.stopped, stopper{name: "player", stop: pl.stop})
	pages.mount("/player", pl.p.AdminHandler())
	r.say("player serving gRPC on %s%s: stream %q = topic %s, materialized copy caught up", pl.addr, movedNote(moved, r.o.GRPCAddr), StreamName, r.topic)

	svc, moved, err := startService(ctx, pl.addr, r.o.HTTPAddr, r.dsn, r.sink.logger())
	if err != nil {
		r.sink.flush(r.out, logPrefix, 0)
		return err
	}
	r.stopped = append(r.stopped, stopper{name: "sportsbook service", stop: svc.stop})
	pages.handle("/cache/status", cachestatus.Handler(svc.s.Client))
	// The OnChange handler logs one "event added" per event of the snapshot, just after it.
	_ = poll(ctx, time.Second, func() bool { return r.sink.count(`msg="event added"`) >= svc.s.Events.Len() })
	st := svc.s.Client.Stats()
	r.say("sportsbook service (examples/sportsbook, embedding cacheclient) ready at index %d: %s", st.Position, viewSizes(st))
	r.sink.flush(r.out, logPrefix, 4)
	r.say("HTTP on %s%s — try:", svc.url, movedNote(moved, r.o.HTTPAddr))
	for _, p := range []string{"/events/1000", "/competitions/10/events", "/tags/featured/events", "/status/live/events", "/sports", "/stats", "/metrics"} {
		fmt.Fprintf(r.out, "   curl %s%s\n", svc.url, p)
	}
	fmt.Fprintf(r.out, "   curl -X POST %s/selections/100012/price -d '{\"price\": \"2.500\"}'   (read-your-writes)\n", svc.url)
	moved, err = pages.start(r.o.StatusAddr)
	if err != nil {
		return err
	}
	r.stopped = append(r.stopped, stopper{name: "status pages", stop: pages.stop})
	r.say("status pages on %s%s — open them in a browser (curl gets their JSON):", pages.url, movedNote(moved, r.o.StatusAddr))
	for _, p := range []struct{ name, path string }{
		{"distributor", "/distributor/status"}, {"player", "/player/status"}, {"cache", "/cache/status"},
	} {
		fmt.Fprintf(r.out, "   %-12s %s%s\n", p.name, pages.url, p.path)
	}
	r.say("demo database: psql '%s'", r.dsn)
	r.say("another service can subscribe too: go run ./examples/sportsbook/cmd/sportsbook -players %s -listen 127.0.0.1:8090 -db '%s'", pl.addr, r.dsn)

	if err := r.script(ctx, svc); err != nil {
		return err
	}
	if err := r.readYourWrites(ctx, svc); err != nil {
		return err
	}
	if err := r.converge(ctx, svc); err != nil {
		return err
	}
	r.serve(ctx, svc)
	if len(r.failed) > 0 {
		return fmt.Errorf("%w: %s", ErrCheckFailed, strings.Join(r.failed, "; "))
	}
	return nil
}

func movedNote(moved bool, asked string) string {
	if moved {
		return fmt.Sprintf(" (%s was taken)", asked)
	}
	return ""
}

// viewSizes lists the rows each view holds.
func viewSizes(st cacheclient.Stats) string {
	parts := make([]string, len(st.Views))
	for i, v := range st.Views {
		parts[i] = fmt.Sprintf("%s %d", v.Name, v.Len)
	}
	return "rows in memory: " + strings.Join(parts, ", ")
}

// stopCause says why ctx ended: its cause (the signal, from signal.NotifyContext).
func stopCause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && c != context.Canceled { // not errors.Is: a signal's cause Is Canceled too
		return c.Error()
	}
	return "canceled"
}

// shutdown stops the components in reverse start order and says so.
func (r *run) shutdown() error {
	var errs []error
	for i := len(r.stopped) - 1; i >= 0; i-- {
		s := r.stopped[i]
		switch err := stopWithin(s.stop, stopTimeout); {
		case errors.Is(err, ErrStuck):
			r.say("%s did NOT stop within %v; going on", s.name, stopTimeout)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		case err != nil:
			r.say("%s stopped: %v", s.name, err)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		case s.done != "":
			r.say("%s", s.done)
		default:
			r.say("%s stopped", s.name)
		}
	}
	r.stopped = nil
	return errors.Join(errs...)
}

// stopTimeout bounds each component's stop: a component that hangs is reported (Dev
// returns ErrStuck) rather than hanging the demo.
const stopTimeout = 30 * time.Second

// ErrStuck is returned (wrapped, with the component's name) by Dev when a component did
// not stop within 30s; its goroutines are left running.
var ErrStuck = errors.New("devenv: did not stop in time")

// stopWithin runs stop and waits for it at most d (then ErrStuck; stop keeps running).
func stopWithin(stop func() error, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- stop() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return ErrStuck
	}
}

// dropSlot drops the demo's replication slot (once the distributor stopped): the topic
// of the embedded broker is gone with it, and a slot left behind would keep PostgreSQL
// from recycling WAL until the next demo.
func (r *run) dropSlot() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.adminDSN)
	if err != nil {
		return fmt.Errorf("devenv: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	return demo.DropSlots(ctx, conn, r.o.Database)
}

// startTail prints the stream from its start in a goroutine; rows below snapshotEnd
// (the start-up epochs) are only counted unless ShowSnapshot.
func (r *run) startTail(ctx context.Context, snapshotEnd int64) error {
	p := &ctl.Printer{W: r.out, MaxValue: r.o.MaxValue, Idle: r.o.ShowIdle}
	print := func(rec ctl.Record) error {
		defer r.seen.Store(rec.Offset + 1)
		if rec.Err == nil && rec.Meta.Kind == record.KindEpochBegin && rec.Offset >= snapshotEnd {
			r.epochs.Add(1)
		}
		if rec.Meta.Kind == record.KindRow && rec.Offset < snapshotEnd && !r.o.ShowSnapshot {
			r.hidden.Add(1)
			p.Skip(rec)
			return nil
		}
		return p.Print(rec)
	}
	tailCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		err = ctl.Tail(tailCtx, ctl.TailOptions{Brokers: r.brokers, Topic: r.topic, From: sarama.OffsetOldest, Follow: true}, print)
	})
	r.stopped = append(r.stopped, stopper{name: "stream printer", stop: func() error { stop(); wg.Wait(); return err }})
	return nil
}

// waitTail returns once the tail has printed every record the topic holds now. The log
// usually ends with a transaction marker, which no reader is given: the tail is done when
// no record a read_committed reader gets is left between what it read and the end
// (waiting for the end itself would wait for the next record published, an idle position
// record only once the database's WAL moves).
func (r *run) waitTail(ctx context.Context) error {
	client, err := sarama.NewClient(r.brokers, kafkaconn.NewConfig("statecast-dev"))
	if err != nil {
		return fmt.Errorf("devenv: kafka: %w", err)
	}
	defer client.Close()
	_, end, err := kafkaconn.CommittedOffsets(client, r.topic, 0)
	if err != nil {
		return fmt.Errorf("devenv: end offset of %s: %w", r.topic, err)
	}
	return poll(ctx, 0, func() bool {
		seen := r.seen.Load()
		if seen >= end {
			return true
		}
		next, err := kafkaconn.NextCommitted(client, r.topic, 0, seen, end)
		return err == nil && next >= end
	})
}

func endOffset(brokers []string, topic string) (int64, error) {
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("statecast-dev"))
	if err != nil {
		return 0, fmt.Errorf("devenv: kafka: %w", err)
	}
	defer client.Close()
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		return 0, fmt.Errorf("devenv: end offset of %s: %w", topic, err)
	}
	return end, nil
}

// poll calls cond every 5ms until it holds (nil), ctx ends, or timeout (> 0) passes
// (context.DeadlineExceeded).
func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// connect opens a connection to the demo database.
func (r *run) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, fmt.Errorf("devenv: connect to the demo database: %w", err)
	}
	return conn, nil
}

// serve keeps everything running for Duration (0: until ctx ends), printing the service's
// log as it comes (change rows in the demo database by hand and watch them arrive).
func (r *run) serve(ctx context.Context, svc *runningService) {
	if r.o.OnServing != nil {
		r.o.OnServing(ctx, svc.url)
	}
	var done <-chan time.Time
	if r.o.Duration > 0 {
		r.say("serving for %v (-for 0: until Ctrl-C); e.g. curl %s/events/1003 — or change a row with psql and watch it arrive", r.o.Duration, svc.url)
		done = time.After(r.o.Duration)
	} else {
		r.say("serving until Ctrl-C; e.g. curl %s/events/1003 — or change a row with psql and watch it arrive", svc.url)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.sink.flush(r.out, logPrefix, 0)
			r.say("stopping (%v): every component in reverse order", stopCause(ctx))
			return
		case <-done:
			r.sink.flush(r.out, logPrefix, 0)
			r.say("stopping (served for %v): every component in reverse order", r.o.Duration)
			return
		case <-t.C:
			r.sink.flush(r.out, logPrefix, 0)
		}
	}
}
