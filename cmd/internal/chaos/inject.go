package chaos

import (
	"context"
	"errors"
	"strings"
	"time"
)

// inject applies one fault and heals it.
func (r *run) inject(ctx context.Context, f fault) error {
	targets := r.resolve(f)
	if f.Target != "" && (len(targets) != 1 || targets[0] != f.Target) {
		r.logf("  %s: %s", f.Target, strings.Join(targets, ", "))
	}
	switch f.Kind {
	case KindKill:
		for _, t := range targets {
			r.procs[t].kill()
		}
		sleep(ctx, f.Hold)
		for _, t := range targets {
			if err := r.procs[t].restart(); err != nil {
				return err
			}
		}
	case KindPause:
		holdEach(ctx, targets, f.Hold, func(t string) { r.procs[t].pause() }, func(t string) { r.procs[t].resume() })
	case KindReset:
		for _, t := range targets {
			n := 0
			for _, p := range r.hopProxies(t) {
				n += p.Reset()
			}
			r.logf("  %s: %d connections reset", t, n)
		}
	case KindBlackhole:
		holdEach(ctx, targets, f.Hold, func(t string) {
			for _, p := range r.hopProxies(t) {
				p.Blackhole()
			}
		}, func(t string) {
			for _, p := range r.hopProxies(t) {
				p.Heal()
			}
		})
	case KindPGRestart:
		if f.Crash {
			return r.pg.Crash(ctx)
		}
		return r.pg.Restart(ctx)
	case KindKafkaRestart:
		restart := r.kafka.Restart
		if f.Crash {
			restart = r.kafka.Kill
		}
		if err := restart(ctx); err != nil {
			return err
		}
		if r.kafka.nodes > 1 {
			r.waitWhole(ctx, f)
		}
	case KindLockLoss:
		return r.lockLoss(ctx, f.Hold)
	case KindBrokerKill, KindLeaderKill, KindBrokerPause, KindBrokerWipe:
		return r.brokerFault(ctx, f)
	}
	return nil
}

// holdEach applies a fault to every target (do), holds it for hold (or until ctx ends),
// then heals every target (undo), even when ctx ended: a fault is never left in place.
func holdEach(ctx context.Context, targets []string, hold time.Duration, do, undo func(string)) {
	for _, t := range targets {
		do(t)
	}
	sleep(ctx, hold)
	for _, t := range targets {
		undo(t)
	}
}

// window is a lock-loss fault's: the distributor that lost the lock, the one that took
// over, and when a record of the old one may land.
type window struct {
	old, next string
	from, to  time.Time
}

// lockLoss: the active distributor's Kafka hop becomes a black hole (what it sends waits
// on the wire), then its lock session is ended in PostgreSQL; once the standby is active,
// and hold later, the hole heals and whatever the old active had sent lands.
func (r *run) lockLoss(ctx context.Context, hold time.Duration) error {
	var old, other *proc
	for _, p := range r.dists {
		if r.distActive(p.name) {
			old = p
		} else {
			other = p
		}
	}
	if old == nil || other == nil {
		return errors.New("no active distributor with a standby")
	}
	holes := r.hopProxies("kafka/" + old.name)
	for _, h := range holes {
		h.Blackhole()
	}
	start := time.Now()
	defer func() {
		for _, h := range holes {
			h.Heal()
		}
		r.mu.Lock()
		// What the hole held lands at the heal; the producer's retries may take longer.
		r.lockLosses = append(r.lockLosses, window{old.name, other.name, start, time.Now().Add(30 * time.Second)})
		r.mu.Unlock()
	}()
	sleep(ctx, 500*time.Millisecond) // let it send into the hole
	var ended int
	err := r.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ended)
	if err != nil {
		return err
	}
	// The old active cannot reach Kafka: what lands from now on is the new active's.
	end := r.tap.end()
	r.logf("  %s's lock session ended (%d backend); waiting for %s", old.name, ended, other.name)
	if err := r.waitFor(ctx, time.Minute, other.name+" active", func() bool { return r.distActive(other.name) }); err != nil {
		return err
	}
	// The hole heals after the new active published (its start-up epoch), so that what
	// the old one had in flight lands after the new active's records, not before them.
	if err := r.waitFor(ctx, 30*time.Second, other.name+" publishing", func() bool { return r.tap.end() > end }); err != nil {
		r.logf("  %v", err)
	}
	sleep(ctx, hold)
	return nil
}
