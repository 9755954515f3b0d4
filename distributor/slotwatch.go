package distributor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/backoff"
)

// The slot watcher measures how far each wal stream's slot is behind the server's WAL
// (bytes and time) and how much WAL it retains, every Config.HealthInterval, on a
// PostgreSQL connection and a goroutine of its own for the group's whole life: while it is
// active and while it is not (a standby, or an activation that Kafka ended and that cannot
// start again while Kafka is down). The capture loop cannot do it: it waits on Kafka's
// acknowledgements, so with Kafka down it would stop measuring just when the slot stops
// being confirmed and the lag grows — the gauges and the status page would keep the last,
// small value. A standby reports the same slot as the active: the alerts take the
// maximum per stream.

// slotLag is one measurement of a stream's slot.
type slotLag struct {
	at        time.Time
	confirmed capture.LSN
	retained  int64
	behind    int64
	behindFor time.Duration
}

// walClock remembers when the server's WAL end was at each position it was seen at, so that
// a slot's confirmed position can be told in time: the slot is behindFor = now − the last
// time the WAL end was at or below the confirmed position (everything written up to then is
// published; what came after is not, or not all of it). Its resolution is the interval of
// the observations.
type walClock struct {
	seen []walSeen // ascending in time and position
}

type walSeen struct {
	at  time.Time
	end capture.LSN
}

// walClockMax bounds the observations kept while the slot confirms nothing; beyond it the
// oldest but one are dropped (the oldest stays: the lag never shrinks for it).
const walClockMax = 4096

// observe records the WAL end seen at now and returns how long the confirmed position is
// behind it.
func (c *walClock) observe(now time.Time, end, confirmed capture.LSN) time.Duration {
	c.seen = append(c.seen, walSeen{at: now, end: end})
	if confirmed >= end {
		c.seen = c.seen[len(c.seen)-1:]
		return 0
	}
	last := -1
	for i, s := range c.seen {
		if s.end > confirmed {
			break
		}
		last = i
	}
	if last < 0 {
		// Confirmed below everything seen: behind at least since the first observation.
		if len(c.seen) > walClockMax {
			c.seen = append(c.seen[:1], c.seen[2:]...)
		}
		return now.Sub(c.seen[0].at)
	}
	c.seen = c.seen[last:]
	return now.Sub(c.seen[0].at)
}

// slotWatchBackoff is the wait before the slot watcher reconnects.
var slotWatchBackoff = backoff.Policy{Min: time.Second, Max: 30 * time.Second}

// watchSlots measures the slots of g's wal streams every interval until ctx ends.
func (g *group) watchSlots(ctx context.Context, interval time.Duration) {
	clocks := make(map[*stream]*walClock, len(g.streams))
	for _, s := range g.streams {
		clocks[s] = &walClock{}
	}
	wait := backoff.New(slotWatchBackoff)
	t := time.NewTicker(interval)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := pgx.Connect(ctx, g.d.cfg.Postgres.DSN)
			if err != nil {
				if ctx.Err() == nil {
					g.d.log.Warn("slot watcher: PostgreSQL connection", "stream", g.topics(), "err", err)
				}
				if !sleepCtx(ctx, wait.Next()) {
					return
				}
				continue
			}
			conn = c
			wait.Reset()
		}
		for _, s := range g.streams {
			if err := s.measureSlot(ctx, conn, clocks[s]); err != nil && ctx.Err() == nil {
				level := slog.LevelWarn
				if errors.Is(err, capture.ErrSlotLost) {
					level = slog.LevelDebug // not created yet: the session creates it
				}
				g.d.log.Log(ctx, level, "slot watcher", "stream", s.cfg.Topic, "slot", s.cfg.Slot, "err", err)
				if conn.IsClosed() || pgconnBroken(err) {
					closeConn(conn)
					conn = nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pgconnBroken reports whether err, of a statement on a connection, leaves the connection
// unusable (a network error, a server that ended it) rather than being the statement's own
// (a PostgreSQL error, a slot that does not exist).
func pgconnBroken(err error) bool {
	var pe *pgconn.PgError
	return !errors.As(err, &pe) && !errors.Is(err, capture.ErrSlotLost)
}

// measureSlot reads s's slot once and records the measurement (metrics, Status).
func (s *stream) measureSlot(ctx context.Context, conn *pgx.Conn, clock *walClock) error {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := capture.ReadSlot(qctx, conn, s.cfg.Slot)
	if err != nil {
		return fmt.Errorf("slot %s: %w", s.cfg.Slot, err)
	}
	now := time.Now()
	lag := slotLag{at: now, confirmed: p.Confirmed, retained: p.Retained(), behind: p.Behind(),
		behindFor: clock.observe(now, p.End, p.Confirmed)}
	s.m.slotRetain.WithLabelValues(s.cfg.Topic).Set(float64(lag.retained))
	s.m.slotBehind.WithLabelValues(s.cfg.Topic).Set(float64(lag.behind))
	s.m.slotBehindTime.WithLabelValues(s.cfg.Topic).Set(lag.behindFor.Seconds())
	s.statusMu.Lock()
	s.statusSlot = lag
	s.statusMu.Unlock()
	return nil
}
