package distributor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// A cycle's views re-read their changed rows at once, each view on one connection: the
// cycle's own and up to ReadConnections-1 more, each in a transaction that imports the
// cycle's snapshot (pg_export_snapshot), so that every read sees exactly the database the
// cycle publishes. A view's reads only read its published state (its hashes and reverse
// maps, changed when the cycle's transaction is acknowledged), so the views need no lock
// between them; what each found is turned into records afterwards, in the views' order,
// on the cycle's goroutine. The stream then waits for its slowest view's reads instead of
// the sum of them all.
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

// readJobs finishes jobs in snap: on snap's own transaction alone when there is one job
// or the stream reads on one connection, else on several, the views that read longest in
// their last cycle first. It returns an error that is not a view's (a connection lost, a
// snapshot that cannot be imported); a view's error is its job's.
func (w *walSession) readJobs(ctx context.Context, snap *capture.Snapshot, jobs []*readJob) error {
	conns := min(w.s.cfg.ReadConnections, len(jobs))
	if conns <= 1 {
		for _, j := range jobs {
			if err := j.run(ctx, snap.Tx); err != nil {
				return err
			}
		}
		return nil
	}
	name, err := snap.Export(ctx)
	if err != nil {
		return err
	}
	slices.SortStableFunc(jobs, func(x, y *readJob) int { return cmp.Compare(y.a.v.lastRead, x.a.v.lastRead) })
	var next atomic.Int64
	var failed atomic.Bool // the cycle fails: the readers take no more views
	take := func(tx pgx.Tx) error {
		for !failed.Load() {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) {
				return nil
			}
			if err := jobs[i].run(ctx, tx); err != nil {
				failed.Store(true)
				return err
			}
		}
		return nil
	}
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for c := 1; c < conns; c++ {
		wg.Go(func() {
			imported, err := capture.ImportSnapshot(ctx, w.s.pool, name, snap.Insert)
			if err == nil {
				defer imported.Close(context.WithoutCancel(ctx))
				settings := maps.Clone(w.s.cfg.ReadSettings)
				if settings == nil {
					settings = map[string]string{}
				}
				settings["lock_timeout"] = readLockTimeout
				err = capture.SetLocal(ctx, imported.Tx, settings)
			}
			if err == nil {
				err = take(imported.Tx)
			} else {
				failed.Store(true)
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
				err = fmt.Errorf("%w: %w", errLockWait, err)
			}
			errs[c] = err
		})
	}
	errs[0] = take(snap.Tx)
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errLockWait) {
			return err
		}
	}
	return errors.Join(errs...)
}

// run finishes j's view in tx. A view's error, and errBulk (the cycle reads the view
// whole, wal_bulk.go), stay in j; any other is returned.
func (j *readJob) run(ctx context.Context, tx pgx.Tx) error {
	start := time.Now()
	err := j.a.finish(ctx, tx, j.ch)
	j.a.v.lastRead = time.Since(start)
	if isErr(err, ErrView) || errors.Is(err, errBulk) {
		j.err = err
		return nil
	}
	return err
}
