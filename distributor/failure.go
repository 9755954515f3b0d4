package distributor

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// A view fails on its own data or SQL (a *ViewError: a NULL or duplicate key, a record
// over the broker's limit, a column type without a mapping, an SQL error such as a
// division by zero in one row or a column dropped under the view). Such a failure stops
// that view only: its last published rows stay, every position record lists it as stale,
// and it is retried with a full read after a backoff (up to 30s) until the row or the SQL
// is fixed, which resumes it without a restart. Any other error (the database restarting,
// a statement timeout, a serialization failure, the broker down) is transient: what
// failed is retried with backoff and nothing is stopped.

// failView stops st after err (op names what failed, for the metric).
func (s *stream) failView(st *viewState, err error, op string) {
	d := st.fail()
	st.retryAt = time.Now().Add(d)
	first := st.failed == nil
	st.failed = err
	s.countErr(st.cfg.Name, op, err)
	s.m.viewFailed.WithLabelValues(s.cfg.Topic, st.cfg.Name).Set(1)
	s.setViewStatus(st)
	var ve *ViewError
	errors.As(err, &ve)
	args := []any{"stream", s.cfg.Topic, "view", st.cfg.Name, "err", err, "retry_in", d}
	if ve != nil {
		args = append(args, "key", ve.Key, "column", ve.Column)
	}
	if first {
		s.log.Error("view stopped: its rows stay as last published until the error is fixed", args...)
	} else {
		s.log.Warn("view still failing", args...)
	}
}

// resumeView clears st's failure after a successful full read.
func (s *stream) resumeView(st *viewState) {
	if st.failed == nil {
		return
	}
	s.log.Info("view resumed", "stream", s.cfg.Topic, "view", st.cfg.Name, "after", st.failed)
	st.failed = nil
	s.m.viewFailed.WithLabelValues(s.cfg.Topic, st.cfg.Name).Set(0)
	s.setViewStatus(st)
}

// staleViews lists the stopped views, except those in except (about to be published).
func (s *stream) staleViews(except ...*viewState) []string {
	var out []string
	for _, st := range s.order {
		if st.failed != nil && !slices.Contains(except, st) {
			out = append(out, st.cfg.Name)
		}
	}
	return out
}

// transientPg reports whether a PostgreSQL error is about the server or the session rather
// than the view (capture.TransientError).
func transientPg(e *pgconn.PgError) bool { return capture.TransientError(e) }

// undefinedColumn is the column an "undefined column" error (SQLSTATE 42703: a column
// dropped or renamed under the view) names, as the message writes it ("price", "m.price");
// "" for other errors.
func undefinedColumn(e *pgconn.PgError) string {
	if e.Code != "42703" {
		return ""
	}
	if e.ColumnName != "" {
		return e.ColumnName
	}
	m, ok := strings.CutPrefix(e.Message, "column ")
	if !ok {
		return ""
	}
	i := strings.Index(m, " does not exist")
	if i < 0 {
		return ""
	}
	return strings.Trim(m[:i], `"`)
}
