package distributor

import (
	"context"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"
)

// lockKey derives the pg_advisory_lock key of a group of streams from its name: a
// polling stream's topic, or "slot:" and the slot of wal streams.
func lockKey(name string) int64 {
	return int64(xxhash.Sum64String("statecast/distributor/" + name))
}

// streamLock is pg_advisory_lock held on a dedicated connection: the session that holds it
// is the stream's only active distributor. The lock is released when the session ends
// (Close, or the process or connection dies), so a standby blocked in acquire takes over.
type streamLock struct {
	conn *pgx.Conn
	key  int64
}

// acquireLock connects and blocks until the stream's lock is held or ctx ends.
func acquireLock(ctx context.Context, dsn, topic string) (*streamLock, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("distributor: lock connection: %w", err)
	}
	key := lockKey(topic)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("distributor: pg_advisory_lock for topic %q: %w", topic, err)
	}
	return &streamLock{conn: conn, key: key}, nil
}

// watch pings the lock's connection every interval and returns when it fails (the lock may
// be lost) or ctx ends.
func (l *streamLock) watch(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, interval*5)
			err := l.conn.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("distributor: advisory lock connection lost: %w", err)
			}
		}
	}
}

// Close ends the session, which releases the lock.
func (l *streamLock) Close() { closeConn(l.conn) }

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// lockPing is how often the active distributor checks the connection that holds its lock;
// it bounds the time during which a distributor that lost its session may still publish.
const lockPing = 500 * time.Millisecond
