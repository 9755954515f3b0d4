package distributor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/backoff"
)

// A group is the streams that one advisory lock makes active together: a polling stream
// alone, or the wal streams that read one replication slot — only one connection can
// stream from a slot, so the streams that share it are active in the same process. One
// active distributor per group; the others wait as standbys.
type group struct {
	d       *Distributor
	streams []*stream
	lock    string // the advisory lock's name: the topic, or the shared slot
	wal     bool
}

// groupsOf groups the streams: each polling stream alone; the wal streams by slot.
func groupsOf(d *Distributor, streams []*stream) []*group {
	var out []*group
	bySlot := map[string]*group{}
	for _, s := range streams {
		if s.cfg.Capture != CaptureWAL {
			out = append(out, &group{d: d, streams: []*stream{s}, lock: s.cfg.Topic})
			continue
		}
		g := bySlot[s.cfg.Slot]
		if g == nil {
			g = &group{d: d, lock: "slot:" + s.cfg.Slot, wal: true}
			bySlot[s.cfg.Slot] = g
			out = append(out, g)
		}
		g.streams = append(g.streams, s)
	}
	return out
}

func (g *group) topics() string {
	t := make([]string, len(g.streams))
	for i, s := range g.streams {
		t[i] = s.cfg.Topic
	}
	return strings.Join(t, ",")
}

func (g *group) setActive(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	for _, s := range g.streams {
		s.active.Store(on)
		s.serving.Store(false)
		s.m.active.WithLabelValues(s.cfg.Topic).Set(v)
	}
}

func (g *group) countErr(op string, err error) {
	for _, s := range g.streams {
		s.countErr("", op, err)
	}
}

// lockBackoff is the wait between failed tries to take the stream lock (PostgreSQL
// unreachable): jittered, from 2s doubling to 30s.
var lockBackoff = backoff.Policy{Min: 2 * time.Second, Max: 30 * time.Second}

// run is the group's lifecycle: wait for the lock (standby), be active until the lock is
// lost or ctx ends, and go back to standby after a lost lock. Fatal start-up errors (an
// unusable topic, a configuration the database refuses) are returned.
func (g *group) run(ctx context.Context) error {
	if g.wal {
		// The slots are measured for the group's life, not an activation's: an activation
		// that Kafka ended (its producer could not abort) cannot start again while Kafka
		// is down, and that is when the slot's lag must go on growing in the gauges.
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { g.watchSlots(wctx, g.d.cfg.HealthInterval) })
		defer wg.Wait()
		defer stop()
	}
	log := g.d.log.With("stream", g.topics())
	lockWait := backoff.New(lockBackoff)
	for {
		g.setActive(false)
		log.Info("standby: waiting for the stream lock")
		lock, err := acquireLock(ctx, g.d.cfg.Postgres.DSN, g.lock)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			g.countErr("lock", err)
			if rerr := refusedByPostgres(err); rerr != nil {
				log.Error("stream lock: PostgreSQL refused the login; the distributor stops", "err", err)
				return rerr
			}
			d := lockWait.Next()
			log.Error("stream lock", "err", err, "retry_in", d)
			if !sleepCtx(ctx, d) {
				return nil
			}
			continue
		}
		lockWait.Reset()
		err = g.activeRun(ctx, lock)
		lock.Close()
		g.setActive(false)
		if ctx.Err() != nil {
			for _, s := range g.streams {
				s.statusMu.Lock()
				pos := s.statusPos
				s.statusMu.Unlock()
				attrs := []any{"stream", s.cfg.Topic}
				if pos != "" {
					attrs = append(attrs, "source_position", pos) // of the last position record Kafka acknowledged
				}
				g.d.log.Info("stream stopped: stream lock released", attrs...)
			}
			return nil
		}
		if errors.Is(err, ErrTopic) || errors.Is(err, ErrConfig) || errors.Is(err, ErrPostgresAuth) {
			return err
		}
		g.countErr("lock", err)
		log.Error("stream stopped; back to standby", "err", err)
		if !sleepCtx(ctx, time.Second) {
			return nil
		}
	}
}

// activeRun runs while the lock is held.
func (g *group) activeRun(parent context.Context, lock *streamLock) error {
	ctx, cancel := context.WithCancelCause(parent)
	var wg sync.WaitGroup
	defer wg.Wait()   // runs last: every goroutine of this activation has ended
	defer cancel(nil) // runs first
	wg.Go(func() {
		if err := lock.watch(ctx, lockPing); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	})
	g.d.log.Info("active: holding the stream lock", "stream", g.topics())
	g.setActive(true)
	if err := g.checkStatements(ctx); err != nil {
		return err
	}
	// The topics as they are now: one may have been deleted (it is created again) or
	// replaced while this process was not active. The state is restored from them below.
	admin, err := sarama.NewClusterAdmin(g.d.cfg.Kafka.Brokers, g.d.cfg.Kafka.clientConfig("-admin"))
	if err != nil {
		return fmt.Errorf("distributor: kafka admin: %w", err)
	}
	for _, s := range g.streams {
		if err := s.ensureTopic(admin); err != nil {
			_ = admin.Close()
			return err
		}
	}
	_ = admin.Close()
	wg.Go(func() {
		if err := g.watchTopics(ctx); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	})
	// The producers first: opening them fences the previous active's, so the state each
	// stream restores next is final — nothing of the previous active can land after it.
	for _, s := range g.streams {
		stop, err := s.startProducer(ctx, func(err error) {
			if ctx.Err() == nil {
				g.d.log.Error("stream producer lost: stopping the stream", "stream", s.cfg.Topic, "err", err)
			}
			cancel(err)
		})
		if err != nil {
			return err
		}
		defer stop()
	}
	if g.wal {
		return g.runWAL(ctx)
	}
	return g.streams[0].runPoll(ctx, &wg)
}

// checkStatements is an activation's first contact with its views' SQL, before the
// topics, the producers (which fence the previous active's) or any read: each SQL is
// parsed alone (capture.CheckStatement), and one of more than one statement refuses the
// configuration (ErrConfig) before any statement of it, or any statement it is pasted
// into, could run. Another error of the SQL (a syntax error, a missing table) is left to
// the view's own start, which reports it as it always has (a polled view stops alone).
func (g *group) checkStatements(ctx context.Context) error {
	c, err := g.d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("distributor: postgres: %w", err)
	}
	defer c.Release()
	for _, s := range g.streams {
		for _, v := range s.cfg.Views {
			err := capture.CheckStatement(ctx, c.Conn().PgConn(), v.Name, v.SQL)
			var pe *pgconn.PgError
			switch {
			case errors.Is(err, capture.ErrStatement):
				return fmt.Errorf("%w: stream %q: %w", ErrConfig, s.cfg.Topic, err)
			case err != nil && !errors.As(err, &pe):
				return fmt.Errorf("distributor: postgres: %w", err)
			}
		}
	}
	return nil
}
