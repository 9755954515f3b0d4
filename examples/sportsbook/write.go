package sportsbook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/cacheclient"
)

// Read-your-writes. A write endpoint changes one row in PostgreSQL and answers from the
// cache, never from what it wrote, and the answer always shows the write: after the
// COMMIT it reads the WAL insert position on the same connection and waits with
// Client.WaitFor until every view of the cache reflects every commit up to it. The insert
// position read after COMMIT returned is at or past the commit record (see cacheclient's
// package documentation); read on another connection, it could have been taken before the
// commit and prove nothing.

// WriteAnswer is the answer of a write endpoint: the view's row as the cache holds it once
// it reflects the write.
type WriteAnswer[T any] struct {
	// SourcePosition is the WAL insert position read after the COMMIT; the cache had
	// reached it when Row was read.
	SourcePosition string `json:"source_position"`
	// WaitedMS is how long the cache took to reach it, in milliseconds.
	WaitedMS float64 `json:"waited_ms"`
	// Row is the view's row, read from the cache.
	Row T `json:"row"`
}

// errNoRow: the UPDATE matched no row (nothing was written).
var errNoRow = errors.New("no such row")

// setPrice serves POST /selections/{id}/price with a body {"price": "2.375"} (a JSON
// string or number): it sets the selection's price and answers the selections row.
func (s *Service) setPrice(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok || !s.hasDB(w) {
		return
	}
	var body struct {
		Price json.Number `json:"price"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Price == "" {
		http.Error(w, `body: want {"price": "2.375"}`, http.StatusBadRequest)
		return
	}
	var market int64
	pos, err := s.commit(r.Context(), `UPDATE selections SET price = $2::numeric WHERE id = $1 RETURNING market_id`,
		[]any{id, body.Price.String()}, &market)
	if !s.written(w, err, "selection", id) {
		return
	}
	key := cacheclient.Key(itoa(market), itoa(id))
	answerFromCache(s, w, r, pos, func(cut *cacheclient.Cut) (Selection, bool) { return s.Selections.In(cut).Get(key) })
}

// setSuspended serves POST /markets/{id}/suspend and /resume: it sets the market's
// suspended flag and answers the event_markets row (a three-table join view).
func (s *Service) setSuspended(w http.ResponseWriter, r *http.Request, suspended bool) {
	id, ok := pathID(w, r)
	if !ok || !s.hasDB(w) {
		return
	}
	var event int64
	pos, err := s.commit(r.Context(), `UPDATE markets SET suspended = $2 WHERE id = $1 RETURNING event_id`,
		[]any{id, suspended}, &event)
	if !s.written(w, err, "market", id) {
		return
	}
	key := cacheclient.Key(itoa(event), itoa(id))
	answerFromCache(s, w, r, pos, func(cut *cacheclient.Cut) (Market, bool) { return s.Markets.In(cut).Get(key) })
}

func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "id: not an integer", http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

func (s *Service) hasDB(w http.ResponseWriter) bool {
	if s.db == nil {
		http.Error(w, "writes need a database: this service runs without one (sportsbook -db DSN, Config.DB)", http.StatusNotImplemented)
		return false
	}
	return true
}

// commit runs sql (an UPDATE … RETURNING) in a transaction of its own, scans the returned
// row into dest, and returns the WAL insert position read after the COMMIT on the same
// connection.
func (s *Service) commit(ctx context.Context, sql string, args []any, dest ...any) (cacheclient.LSN, error) {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, sql, args...).Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoRow
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return 0, fmt.Errorf("committed, but the WAL position could not be read: %w", err)
	}
	return cacheclient.ParseLSN(lsn)
}

// written answers the errors of commit; true when the write is committed.
func (s *Service) written(w http.ResponseWriter, err error, what string, id int64) bool {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoRow):
		http.Error(w, fmt.Sprintf("no such %s %d", what, id), http.StatusNotFound)
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"): // data exception: a bad value
		http.Error(w, "database refused the value: "+pgErr.Message, http.StatusBadRequest)
	default:
		s.log.Error("write failed", what, id, "err", err)
		http.Error(w, "database: "+err.Error(), http.StatusInternalServerError)
	}
	return false
}

// answerFromCache waits until the cache reflects every commit up to pos (at most the
// service's WriteWait) and answers the row read returns from one Cut of the cache.
func answerFromCache[T any](s *Service, w http.ResponseWriter, r *http.Request, pos cacheclient.LSN, read func(*cacheclient.Cut) (T, bool)) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), s.writeWait)
	defer cancel()
	err := s.Client.WaitFor(ctx, pos)
	waited := time.Since(start)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		http.Error(w, fmt.Sprintf("committed at source position %s, but the cache did not reach it within %v: the stream's distributor or player is not running, or far behind",
			pos, s.writeWait), http.StatusGatewayTimeout)
		return
	case errors.Is(err, cacheclient.ErrNoSourcePosition):
		http.Error(w, fmt.Sprintf("committed at source position %s, but the stream carries no source position (its distributor polls; read-your-writes needs capture: wal)", pos),
			http.StatusServiceUnavailable)
		return
	default: // a stale view, a closed client, the request's end
		http.Error(w, fmt.Sprintf("committed at source position %s, but the cache cannot show it: %v", pos, err), http.StatusServiceUnavailable)
		return
	}
	row, ok := read(s.Client.Read())
	if !ok {
		// Deleted by a later commit, or refused by the view's decoder (logged).
		http.Error(w, fmt.Sprintf("committed at source position %s, but the row is not in the view", pos), http.StatusNotFound)
		return
	}
	s.log.Info("read your write", "source_position", pos, "waited", waited.Round(time.Microsecond))
	writeJSON(w, WriteAnswer[T]{SourcePosition: pos.String(), WaitedMS: float64(waited.Microseconds()) / 1000, Row: row})
}
