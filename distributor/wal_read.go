package distributor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// A cycle's views re-read their changed rows at once: each view on a goroutine of its
// own, its lookups run by a capture.Batch of its connection with the lookups of the other
// views there, in rounds of one pipeline each — so that the cycle waits a few round trips
// instead of one per statement. The views are spread over the cycle's own connection and
// up to ReadConnections-1 more that are free (tryConn), each in a transaction that imports the cycle's snapshot
// (pg_export_snapshot), so that every read sees exactly the database the cycle publishes;
// the views that read longest in their last cycle are placed first, each on the
// connection with the least reading so far. A view's reads only read its published state
// (its hashes and reverse maps, changed when the cycle's transaction is acknowledged), so
// the views need no lock between them; what each found is turned into records
// afterwards, in the views' order, on the cycle's goroutine. The stream then waits for
// its slowest connection's reads instead of the sum of them all.
//
// The other connections take their locks with a lock_timeout: a TRUNCATE (or any lock
// that conflicts with reading) waiting for the cycle's transaction, which has read the
// table, queues their reads behind it, while the cycle waits for them — a deadlock that
// PostgreSQL cannot see, since one of its waits is the cycle's goroutine. A read that
// times out on a lock makes the cycle take another snapshot (errLockWait), once its own
// transaction, which the TRUNCATE waits for, is closed.

// errLockWait: a read on another connection of the cycle timed out waiting for a lock.
var errLockWait = errors.New("distributor: a cycle's read waited for a lock that waits for the cycle; taking another snapshot")

// readLockTimeout bounds how long a cycle's other connections wait for a lock.
const readLockTimeout = "200ms"

// readJob is one view's part of a cycle's reads.
type readJob struct {
	a   *mappedRead
	ch  *viewChanges
	err error // a view's error (ErrView): that view fails, the others go on
}

// connWait is how long a cycle waits for a pool connection for work beside its own reads
// (another reader, a background read): that work starts only on a connection that is
// free, or soon is. A cycle holds its tables' locks while it waits, and a connection held
// by a read queued behind a TRUNCATE, which waits for those locks, would never come.
const connWait = 20 * time.Millisecond

// tryConn acquires a pool connection, waiting at most connWait; false when none came.
func (s *stream) tryConn(ctx context.Context) (*pgxpool.Conn, bool) {
	actx, cancel := context.WithTimeout(ctx, connWait)
	defer cancel()
	c, err := s.pool.Acquire(actx)
	return c, err == nil
}

// readSplit is how much reading, by the views' reads of their last cycle, takes one more
// connection: another connection costs the import of the snapshot (a few round trips),
// and the reads of a live cycle, a few rows per view, cost less than that; a cycle whose
// views read long (many changed rows, costly lookups) reads them side by side.
const readSplit = 10 * time.Millisecond

// readJobs finishes jobs in snap, on up to ReadConnections connections, one per readSplit
// of the jobs' last reads. It returns an error that is not a view's (a connection lost, a
// snapshot that cannot be imported); a view's error is its job's.
func (w *walSession) readJobs(ctx context.Context, snap *capture.Snapshot, jobs []*readJob) error {
	var last time.Duration
	for _, j := range jobs {
		last += j.a.v.lastRead
	}
	conns := min(w.s.cfg.ReadConnections, len(jobs), 1+int(last/readSplit))
	if conns < 1 {
		return nil
	}
	var helpers []*pgxpool.Conn
	defer func() {
		for _, c := range helpers {
			c.Release()
		}
	}()
	for len(helpers) < conns-1 {
		c, ok := w.s.tryConn(ctx)
		if !ok {
			break
		}
		helpers = append(helpers, c)
	}
	groups := spreadJobs(jobs, 1+len(helpers))
	var name string
	if len(groups) > 1 {
		var err error
		if name, err = snap.Export(ctx); err != nil {
			return err
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := 0
	for c, group := range groups {
		first := next
		next += len(group)
		wg.Go(func() {
			tx := snap.Tx
			if c > 0 {
				imported, err := w.importForRead(ctx, helpers[c-1], name, snap.Insert)
				if err != nil {
					for i := range group {
						errs[first+i] = err
					}
					return
				}
				defer imported.Close(context.WithoutCancel(ctx))
				tx = imported.Tx
			}
			b := capture.NewBatch(tx, len(group))
			var jwg sync.WaitGroup
			for i, j := range group {
				jwg.Go(func() {
					defer b.Leave(ctx)
					errs[first+i] = j.run(ctx, b)
				})
			}
			jwg.Wait()
		})
	}
	wg.Wait()
	for _, err := range errs {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			return fmt.Errorf("%w: %w", errLockWait, err)
		}
	}
	return errors.Join(errs...)
}

// spreadJobs places jobs on n connections: the longest readers of the last cycle first,
// each on the connection with the least reading so far.
func spreadJobs(jobs []*readJob, n int) [][]*readJob {
	sorted := slices.Clone(jobs)
	slices.SortStableFunc(sorted, func(x, y *readJob) int { return cmp.Compare(y.a.v.lastRead, x.a.v.lastRead) })
	groups := make([][]*readJob, n)
	load := make([]time.Duration, n)
	for _, j := range sorted {
		c := 0
		for i := range load {
			if load[i] < load[c] || load[i] == load[c] && len(groups[i]) < len(groups[c]) {
				c = i
			}
		}
		groups[c] = append(groups[c], j)
		load[c] += max(j.a.v.lastRead, time.Microsecond)
	}
	return slices.DeleteFunc(groups, func(g []*readJob) bool { return len(g) == 0 })
}

// importForRead opens a transaction in the cycle's exported snapshot on conn, whose locks
// wait at most readLockTimeout.
func (w *walSession) importForRead(ctx context.Context, conn *pgxpool.Conn, name string, at capture.LSN) (*capture.Snapshot, error) {
	imported, err := capture.ImportSnapshot(ctx, conn, name, at)
	if err != nil {
		return nil, err
	}
	settings := maps.Clone(w.s.cfg.ReadSettings)
	if settings == nil {
		settings = map[string]string{}
	}
	settings["lock_timeout"] = readLockTimeout
	if err := capture.SetLocal(ctx, imported.Tx, settings); err != nil {
		imported.Close(context.WithoutCancel(ctx))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			return nil, fmt.Errorf("%w: %w", errLockWait, err)
		}
		return nil, err
	}
	return imported, nil
}

// run finishes j's view with rn. A view's error, and errBulk (the cycle reads the view
// whole, wal_bulk.go), stay in j; any other is returned.
func (j *readJob) run(ctx context.Context, rn capture.Runner) error {
	err := j.a.finish(ctx, rn, j.ch)
	j.a.v.lastRead = j.a.took
	if isErr(err, ErrView) || errors.Is(err, errBulk) {
		j.err = err
		return nil
	}
	return err
}
