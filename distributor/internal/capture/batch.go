package capture

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A Query is a lookup of Tuples whose rows go to Each (Lookup.Run). Took, when set, is
// added the time the query's statements took: in a Batch, from the end of the result
// before them in the pipeline to the end of theirs, which is the time the server spent on
// them (it runs a pipeline's statements one after the other) and the time their rows took
// to arrive and to be handled.
type Query struct {
	L      *Lookup
	Tuples [][][]byte
	Each   func(row [][]byte) error
	Took   *time.Duration
}

// A Runner runs lookups in a snapshot: TxRunner one statement after the other on its
// transaction, a Batch the statements of several goroutines together.
type Runner interface {
	// Run runs the queries in order and returns the first error; after an error the
	// queries after it may not run.
	Run(ctx context.Context, qs ...Query) error
	// Release lets the connection drop the buffer of a huge row it read (a buffer of the
	// row's size that pgconn keeps until its next read) and collects the garbage.
	Release(ctx context.Context)
}

// TxRunner runs each lookup as a statement of its own on Tx.
type TxRunner struct{ Tx pgx.Tx }

// Run runs the queries on the transaction, one after the other.
func (r TxRunner) Run(ctx context.Context, qs ...Query) error {
	for _, q := range qs {
		start := time.Now()
		err := q.L.Run(ctx, r.Tx, q.Tuples, q.Each)
		if q.Took != nil {
			*q.Took += time.Since(start)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Release reads on the connection (a small statement) and collects.
func (r TxRunner) Release(ctx context.Context) {
	_, _ = r.Tx.Exec(ctx, "SELECT 1")
	runtime.GC()
}

// A Batch runs the lookups of several goroutines — a cycle's views, each reading its
// changed rows — on one transaction, in rounds: once every member has submitted a lookup
// or left, the round's statements go to PostgreSQL in one pipeline (pgconn's pipeline
// mode: one write, one wait), and the rows come back in order, each result handed to its
// lookup's callback on the goroutine that runs the round, while its member waits. A view
// whose rows need two steps (the hops of a mapping, then the rows they reach; the rows a
// weak mapping may have left) takes part in two or three rounds; the cycle's reads then
// cost a few round trips instead of one per statement, which on a loaded server is most
// of a statement's cost.
//
// A statement that fails aborts what follows it in the transaction, so each round
// runs in a savepoint (released at its end): after a statement's own error (bad data or SQL of one view:
// a PostgreSQL error that is not transient), the round rolls back to it and runs the
// statements after the failed one again, and only that member gets the error — as it
// would running alone. Any other error (the connection, a transient one, a schema change
// under a prepared statement) ends every request of the round with it.
//
// A member calls Run from one goroutine at a time and Leave once, when it submits no
// more; Batch never runs the callbacks of two requests at once.
type Batch struct {
	tx      pgx.Tx
	mu      sync.Mutex
	members int          // that may still submit
	queue   []*batchReq  // submitted, waiting for their round
	rounds  int          // run so far (tests)
	failed  map[int]bool // rounds that rolled back (tests)
}

type batchReq struct {
	qs      []Query // none: a statement for Release
	err     error
	stmtErr bool // err is the request's own statement's
	done    chan struct{}
}

// NewBatch returns a Batch of members on tx.
func NewBatch(tx pgx.Tx, members int) *Batch {
	return &Batch{tx: tx, members: members}
}

// Run submits the queries and waits for their round.
func (b *Batch) Run(ctx context.Context, qs ...Query) error {
	qs = slices.DeleteFunc(slices.Clone(qs), func(q Query) bool { return len(q.Tuples) == 0 })
	if len(qs) == 0 {
		return nil
	}
	r := &batchReq{qs: qs, done: make(chan struct{})}
	b.submit(ctx, r)
	<-r.done
	return r.err
}

// Release has the next round read on the connection, and collects the garbage.
func (b *Batch) Release(ctx context.Context) {
	r := &batchReq{done: make(chan struct{})}
	b.submit(ctx, r)
	<-r.done
	runtime.GC()
}

// Leave: the member submits nothing more.
func (b *Batch) Leave(ctx context.Context) {
	b.mu.Lock()
	b.members--
	round := b.take()
	b.mu.Unlock()
	if round != nil {
		b.run(ctx, round)
	}
}

// Rounds is how many rounds ran, and how many of them rolled back to their savepoint.
func (b *Batch) Rounds() (rounds, rolledBack int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rounds, len(b.failed)
}

func (b *Batch) submit(ctx context.Context, r *batchReq) {
	b.mu.Lock()
	b.queue = append(b.queue, r)
	round := b.take()
	b.mu.Unlock()
	if round != nil {
		b.run(ctx, round)
	}
}

// take returns the queued requests when every member has submitted (b.mu held).
func (b *Batch) take() []*batchReq {
	if len(b.queue) == 0 || len(b.queue) < b.members {
		return nil
	}
	round := b.queue
	b.queue = nil
	return round
}

// run runs a round and ends each of its requests.
func (b *Batch) run(ctx context.Context, reqs []*batchReq) {
	defer func() {
		for _, r := range reqs {
			close(r.done)
		}
	}()
	b.mu.Lock()
	n := b.rounds
	b.rounds++
	b.mu.Unlock()
	conn := b.tx.Conn().PgConn()
	for rest := reqs; len(rest) > 0; {
		failed, err := b.pipeline(ctx, conn, rest)
		if err != nil {
			for _, r := range rest[max(failed, 0):] {
				if r.err == nil {
					r.err = err
				}
			}
			return
		}
		if failed < 0 {
			return
		}
		// The request's own statement failed: the others run again after it.
		b.mu.Lock()
		if b.failed == nil {
			b.failed = map[int]bool{}
		}
		b.failed[n] = true
		b.mu.Unlock()
		if _, err := b.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT statecast_batch; RELEASE SAVEPOINT statecast_batch"); err != nil {
			for _, r := range rest[failed+1:] {
				r.err = err
			}
			return
		}
		rest = rest[failed+1:]
	}
}

// pipeline sends reqs as one pipeline after a savepoint and reads their results in order.
// failed is the index of the request whose own statement failed (its err set; the
// requests after it did not run), -1 when none did; err ends every request from failed
// on (from the first when failed is -1).
func (b *Batch) pipeline(ctx context.Context, conn *pgconn.PgConn, reqs []*batchReq) (failed int, err error) {
	type sent struct {
		req     int
		q       *Query // nil: Release's statement
		prepare string // a statement prepared first: its result comes before the query's
	}
	ps := preparedOn(conn)
	var order []sent
	pl := conn.StartPipeline(ctx)
	pl.SendQueryParams("SAVEPOINT statecast_batch", nil, nil, nil, nil)
	pl.SendFlushRequest()
	formats := []int16{1}
	preparing := map[string]string{}
	for i, r := range reqs {
		if len(r.qs) == 0 {
			pl.SendQueryParams("SELECT 1", nil, nil, nil, nil)
			order = append(order, sent{req: i})
			continue
		}
		for qi := range r.qs {
			q := &r.qs[qi]
			l := q.L
			stmt := ""
			if len(q.Tuples) <= l.perValue {
				if name, ok := ps.names[l.eachID]; ok {
					stmt = name
				} else if name, ok := preparing[l.eachID]; ok {
					stmt = name
				} else {
					stmt = ps.name(l)
					preparing[l.eachID] = stmt
					pl.SendPrepare(stmt, l.each, l.params)
					order = append(order, sent{req: i, q: q, prepare: stmt})
				}
			}
			for tuples := q.Tuples; len(tuples) > 0; {
				n := min(len(tuples), lookupChunk)
				params, pformats := l.arrays(tuples[:n])
				tuples = tuples[n:]
				if stmt != "" {
					pl.SendQueryPrepared(stmt, params, pformats, formats)
				} else {
					pl.SendQueryParams(l.sql, params, l.params, pformats, formats)
				}
				pl.SendFlushRequest()
				order = append(order, sent{req: i, q: q})
			}
		}
	}
	pl.SendQueryParams("RELEASE SAVEPOINT statecast_batch", nil, nil, nil, nil)
	if err := pl.Sync(); err != nil {
		_ = pl.Close()
		return -1, err
	}
	failed = -1
	fail := func(s sent, e error) {
		var pe *pgconn.PgError
		i := s.req
		r := reqs[i]
		switch {
		case s.q != nil && errors.As(e, &pe) && pe.Code == "0A000" && len(s.q.Tuples) <= s.q.L.perValue:
			err = s.q.L.preparedFailed(conn, e)
		case errors.As(e, &pe) && !TransientError(pe):
			r.err, r.stmtErr = e, true
			failed = i
		default:
			err = e
		}
		if err != nil {
			failed = i
		}
	}
	res, rerr := pl.GetResults()
	if rerr == nil {
		if rr, ok := res.(*pgconn.ResultReader); ok {
			_, rerr = rr.Close()
		}
	}
	if rerr != nil {
		_ = pl.Close()
		return -1, fmt.Errorf("capture: savepoint: %w", rerr)
	}
	mark := time.Now()
	took := func(s sent) {
		now := time.Now()
		if s.q != nil && s.q.Took != nil {
			*s.q.Took += now.Sub(mark)
		}
		mark = now
	}
	for _, s := range order {
		res, e := pl.GetResults()
		if e != nil {
			fail(s, e)
			break
		}
		if s.prepare != "" {
			ps.names[s.q.L.eachID] = s.prepare
			took(s)
			continue
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			err = fmt.Errorf("capture: batch: unexpected result %T", res)
			failed = s.req
			break
		}
		r := reqs[s.req]
		if s.q != nil && r.err == nil {
			if e := s.q.L.checkColumns(rr.FieldDescriptions()); e != nil {
				r.err = e
			}
		}
		for s.q != nil && r.err == nil && rr.NextRow() {
			if e := s.q.Each(rr.Values()); e != nil {
				r.err = e // the callback's own: the result is drained, the round goes on
			}
		}
		if _, e := rr.Close(); e != nil {
			if r.err != nil && !r.stmtErr {
				r.err = nil // the statement's error says more than the callback's
			}
			fail(s, e)
			break
		}
		took(s)
	}
	if failed < 0 && err == nil {
		// RELEASE: the transaction is back at its top level (pg_export_snapshot, which a
		// cycle may call after its reads, refuses a subtransaction).
		res, e := pl.GetResults()
		if rr, ok := res.(*pgconn.ResultReader); ok && e == nil {
			_, e = rr.Close()
		}
		if e != nil {
			err, failed = fmt.Errorf("capture: release savepoint: %w", e), 0
		}
	}
	if cerr := pl.Close(); cerr != nil && failed < 0 && err == nil {
		var pe *pgconn.PgError
		if !errors.As(cerr, &pe) {
			return 0, cerr
		}
	}
	if err != nil && failed < 0 {
		failed = 0
	}
	return failed, err
}

// arrays are the lookup's parameters for tuples: one binary array per column.
func (l *Lookup) arrays(tuples [][][]byte) (params [][]byte, formats []int16) {
	params = make([][]byte, len(l.params))
	formats = make([]int16, len(l.params))
	for c := range l.params {
		params[c] = encodeArray(l.elems[c], tuples, c)
		formats[c] = 1
	}
	return params, formats
}

// TransientError reports whether a PostgreSQL error is about the server or the session
// rather than the statement: connection problems (class 08), a transaction rolled back by
// the server (40: serialization failure, deadlock), resources (53), a lock not obtained
// (55P03) or an object in use (55006), operator intervention (57: statement timeout or
// cancel, shutdown, restart) and system errors (58, XX). A retry may succeed.
func TransientError(e *pgconn.PgError) bool {
	if len(e.Code) != 5 {
		return false
	}
	switch e.Code[:2] {
	case "08", "40", "53", "57", "58", "XX":
		return true
	}
	return e.Code == "55P03" || e.Code == "55006"
}
