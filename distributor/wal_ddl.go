package distributor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// Schema changes of the base tables while a wal stream runs. Logical decoding carries no
// DDL: pgoutput sends a relation message (the table's columns and replica identity, as of
// the change that follows it) before the first change of a table in a session and after
// each change of its definition, and the views' queries see the new definition at once.
//
//   - A column added: the receiver finds its captured columns by name in the new message,
//     and the views' queries run as before; nothing is read again. A view whose result
//     gains the column (a `SELECT *`) returns other columns than it was analyzed for: its
//     first lookup after it fails with capture.ErrColumnsChanged, which ends the session,
//     and the new session's analysis gives the view a new definition (viewDef): that view
//     alone gets one reconcile epoch, with the column (wal_start.go). The others continue.
//   - A column a view reads dropped or renamed: the view's queries fail ("column … does
//     not exist"), which stops that view (a *ViewError naming the view and the column,
//     failure.go) while the others go on; a captured column that vanished from the
//     relation message makes only the views that map the table through it re-read it
//     (capture.Change.Missing), and that read stops them the same way. The stopped view
//     is retried with backoff and resumes once its SQL runs again (the column back, or its
//     SQL changed and the distributor restarted). A session that starts while a
//     previously published view's SQL does not run leaves that view out (stopped, stale
//     in every position record) instead of refusing the stream, and analyzes again, in a
//     new session, once it does.
//   - A table's replica identity changed (REPLICA IDENTITY, a new primary key): its old
//     key tuples hold other columns than the captured identity. Its changes are Unknown
//     (the views that read it re-read it in full, off the cycles) and the session ends
//     after its cycle, so that the views are analyzed again with the new identity
//     (capture.Receiver.RelationChanged). A new index changes nothing until the next
//     session's analysis, which may map the table better.

// errReanalyze ends a session whose views must be analyzed again (a schema change): the
// next session starts at once, without a backoff or an error counted.
var errReanalyze = errors.New("distributor: the views must be analyzed again")

// reanalyze reports whether a session ended for a schema change.
func reanalyze(err error) bool {
	return errors.Is(err, errReanalyze) || errors.Is(err, capture.ErrColumnsChanged)
}

// analyzeView analyzes one view in tx, in a savepoint of its own. A view that was
// published before and whose SQL fails now (a column or table of it dropped or renamed)
// is stopped and left out of the session: it returns nil, nil. Any other failure of the
// analysis is the stream's configuration error, as at a first start.
func (w *walSession) analyzeView(ctx context.Context, tx pgx.Tx, st *viewState) (*capture.ViewDeps, error) {
	v := st.cfg
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("distributor: analyze views: %w", err)
	}
	d, err := capture.Analyze(ctx, sp, capture.ViewSpec{Name: v.Name, SQL: v.SQL, Key: v.Key, Tables: v.Tables, Depends: v.Depends})
	if err == nil {
		return d, sp.Commit(ctx)
	}
	_ = sp.Rollback(ctx)
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
		return nil, w.configErr(err)
	case transientPg(pgErr):
		return nil, fmt.Errorf("distributor: analyze view %q: %v", v.Name, err)
	case st.ended == 0 && len(st.hashes) == 0:
		return nil, w.configErr(err) // never published: its SQL is wrong, not out of date
	}
	if !slices.Contains(w.unanalyzed, st) {
		w.unanalyzed = append(w.unanalyzed, st)
	}
	w.s.failView(st, sqlError(v, pgErr), "analyze")
	return nil, nil
}

// nextReanalyze is when the first view left out of the session is due for a new try.
func (w *walSession) nextReanalyze() (time.Time, bool) {
	var at time.Time
	for _, st := range w.unanalyzed {
		if at.IsZero() || st.retryAt.Before(at) {
			at = st.retryAt
		}
	}
	return at, !at.IsZero()
}

// schemaChanged ends the session (errReanalyze) when its views must be analyzed again: a
// table's replica identity changed, or a view left out of it analyzes again.
func (w *walSession) schemaChanged(ctx context.Context) error {
	if w.recv.RelationChanged() {
		return fmt.Errorf("%w: a table's replica identity is not the analyzed one", errReanalyze)
	}
	now := time.Now()
	for _, st := range w.unanalyzed {
		if now.Before(st.retryAt) {
			continue
		}
		ok, err := w.analyzable(ctx, st)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: view %q runs again", errReanalyze, st.cfg.Name)
		}
	}
	return nil
}

// analyzable tries to analyze a view left out of the session; a failure of its SQL stops
// it again (a longer backoff).
func (w *walSession) analyzable(ctx context.Context, st *viewState) (bool, error) {
	tx, err := w.s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("distributor: analyze view %q: %w", st.cfg.Name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	v := st.cfg
	_, err = capture.Analyze(ctx, tx, capture.ViewSpec{Name: v.Name, SQL: v.SQL, Key: v.Key, Tables: v.Tables, Depends: v.Depends})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &pgErr) && !transientPg(pgErr):
		w.s.failView(st, sqlError(v, pgErr), "analyze")
		return false, nil
	}
	return false, fmt.Errorf("distributor: analyze view %q: %w", v.Name, err)
}

// readsMissing reports whether one of v's mappings of c's table reads a column the table
// does not have any more.
func (v *walView) readsMissing(c capture.Change) bool {
	if len(c.Missing) == 0 {
		return false
	}
	for _, r := range v.routes[c.Rel] {
		for _, p := range r.pos {
			if p < 0 || slices.Contains(c.Missing, p) {
				return true
			}
		}
	}
	return false
}
