package capture

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/pgconn"
)

// A cycle reads a few values of each view with the same statement, the lookup one tuple
// at a time (eachSQL), and planning it — a view of joins, aggregates and subqueries —
// costs PostgreSQL about as much as running it for those few values. So that statement is
// prepared once per connection and executed by name: after its first executions
// PostgreSQL keeps a generic plan (the values are parameters either way), and a cycle
// pays for running it only. The lookups by arrays, used for more values than a view's
// crossover, are planned for their values at each read, where planning is worth it.
//
// Each connection remembers the statements prepared on it (pgconn's CustomData). A
// prepared statement whose result columns a schema change altered fails with 0A000
// ("cached plan must not change result type"); the connection then forgets it and the
// next preparation takes another name, and the error is ErrColumnsChanged, as the
// lookup's column check says for an unnamed statement.

// preparedKey is the CustomData key of a connection's preparedSet.
const preparedKey = "statecast.capture.prepared"

// preparedSet is what one connection has prepared: statement key → name.
type preparedSet struct {
	names map[string]string
	gen   int // bumped when a statement is forgotten: names are never reused
}

// preparedOn returns what conn has prepared.
func preparedOn(conn *pgconn.PgConn) *preparedSet {
	ps, _ := conn.CustomData()[preparedKey].(*preparedSet)
	if ps == nil {
		ps = &preparedSet{names: map[string]string{}}
		conn.CustomData()[preparedKey] = ps
	}
	return ps
}

// name is the name l's per-tuple statement takes when it is prepared next.
func (ps *preparedSet) name(l *Lookup) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.eachID))
	return fmt.Sprintf("statecast_each_%016x_%d", h.Sum64(), ps.gen)
}

// prepareEach returns the name of l's per-tuple statement on conn, preparing it first
// when conn has not.
func (l *Lookup) prepareEach(ctx context.Context, conn *pgconn.PgConn) (string, error) {
	ps := preparedOn(conn)
	if name, ok := ps.names[l.eachID]; ok {
		return name, nil
	}
	name := ps.name(l)
	if _, err := conn.Prepare(ctx, name, l.each, l.params); err != nil {
		return "", err
	}
	ps.names[l.eachID] = name
	return name, nil
}

// preparedFailed handles an error of a prepared lookup on conn: one of a plan whose result
// columns changed makes conn forget the statement.
func (l *Lookup) preparedFailed(conn *pgconn.PgConn, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" {
		return err
	}
	if ps, _ := conn.CustomData()[preparedKey].(*preparedSet); ps != nil {
		delete(ps.names, l.eachID)
		ps.gen++
	}
	return fmt.Errorf("%w: %v", ErrColumnsChanged, err) // not a PgError: no view's own error
}
