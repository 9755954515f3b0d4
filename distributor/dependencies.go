package distributor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// ViewDependencies says how the changes of each base table of a wal view reach its rows.
type ViewDependencies struct {
	Stream string
	View   string
	// Tables has one line per base table: "t: by the view's key", "t: by column(s) c
	// (selected)", "t: full re-read of the view on every change (why)".
	Tables []string
	// Err is why the view cannot be captured from the WAL (a table without a replica
	// identity, a materialized view, SQL that does not parse): Run would refuse to start.
	Err error
}

// Dependencies asks PostgreSQL (cfg's DSN) how each view of cfg's wal streams depends on
// its tables, as Run does at start, and changes nothing. A view whose changes map to none
// of its rows by key is re-read in full on every change of the unmapped tables: the lines
// say which and why (cachectl validate -analyze prints them).
func Dependencies(ctx context.Context, cfg Config) ([]ViewDependencies, error) {
	c := cfg.clone()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, c.Postgres.DSN)
	if err != nil {
		return nil, fmt.Errorf("distributor: postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var out []ViewDependencies
	for _, s := range c.Streams {
		if s.Capture != CaptureWAL {
			continue
		}
		for _, v := range s.Views {
			d := ViewDependencies{Stream: s.Topic, View: v.Name}
			tx, err := conn.Begin(ctx)
			if err != nil {
				return nil, err
			}
			deps, err := capture.Analyze(ctx, tx, capture.ViewSpec{Name: v.Name, SQL: v.SQL, Key: v.Key, Tables: v.Tables, Depends: v.Depends})
			_ = tx.Rollback(ctx)
			if err != nil {
				d.Err = err
			} else {
				d.Tables = deps.Describe()
			}
			out = append(out, d)
		}
	}
	return out, nil
}
