package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL carries a constant through a join's equality into an aggregated, DISTINCT or
// windowed subquery (its equivalence classes: e.id = 5 and e.id = ms.event_id make
// ms.event_id = 5), but not an array: for a view that joins back an aggregate (a CTE of
// counts per event joined to events), cols = ANY(values) filters the subquery's output
// after computing all of it, while cols = value reads only that value's rows. Plan asks
// the planner which way a lookup is cheaper and up to how many tuples; Run then sends the
// one-tuple statements in one round trip (each planned with its own values).

// planOverhead is what one more statement costs beside its plan's estimate (its planning
// and its round trip in the batch), in the planner's cost units.
const planOverhead = 30

// maxPerValue bounds the tuples read one at a time in one lookup.
const maxPerValue = 2000

var planSeq atomic.Int64

// Plan sets up to how many tuples l reads them one tuple at a time, from the estimated
// total costs of the generic plans of l's two statements in tx: the array lookup costs
// about the same whatever the number of tuples when the condition does not reach the
// view's tables, and n one-tuple lookups n times theirs.
func (l *Lookup) Plan(ctx context.Context, tx pgx.Tx) error {
	if l.single == "" {
		return nil
	}
	arrays, err := genericCost(ctx, tx, l.sql, l.params)
	if err != nil {
		return err
	}
	one, err := genericCost(ctx, tx, l.single, l.elems)
	if err != nil {
		return err
	}
	n := int(arrays / (one + planOverhead))
	if n < 2 {
		n = 0
	}
	l.perValue = min(n, maxPerValue)
	return nil
}

// PerValue is up to how many tuples Run reads them one tuple at a time (0: never).
func (l *Lookup) PerValue() int { return l.perValue }

// genericCost is the planner's total cost of sql's generic plan (parameters of types
// types, values unknown).
func genericCost(ctx context.Context, tx pgx.Tx, sql string, types []uint32) (float64, error) {
	name := fmt.Sprintf("statecast_plan_%d", planSeq.Add(1))
	var typeNames []string
	for _, t := range types {
		var n string
		if err := tx.QueryRow(ctx, "SELECT format_type($1, NULL)", t).Scan(&n); err != nil {
			return 0, err
		}
		typeNames = append(typeNames, n)
	}
	decl, args := "", ""
	for i, n := range typeNames {
		if i > 0 {
			decl += ", "
			args += ", "
		}
		decl += n
		args += "NULL"
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("PREPARE %s (%s) AS %s", name, decl, sql)); err != nil {
		return 0, fmt.Errorf("%w: plan of a lookup: %w", ErrAnalyze, err)
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "DEALLOCATE "+name) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return 0, err
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "SET LOCAL plan_cache_mode = auto") }()
	var out string
	if err := tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (FORMAT JSON) EXECUTE %s(%s)", name, args)).Scan(&out); err != nil {
		return 0, fmt.Errorf("%w: plan of a lookup: %w", ErrAnalyze, err)
	}
	var plans []struct {
		Plan struct {
			TotalCost float64 `json:"Total Cost"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) == 0 {
		return 0, fmt.Errorf("%w: plan of a lookup: %v", ErrAnalyze, err)
	}
	return plans[0].Plan.TotalCost, nil
}

// runEach reads the rows of each tuple with the one-tuple statement, all in one round
// trip.
func (l *Lookup) runEach(ctx context.Context, tx pgx.Tx, tuples [][][]byte, each func(row [][]byte) error) error {
	b := &pgconn.Batch{}
	pformats := make([]int16, len(l.elems))
	for i := range pformats {
		pformats[i] = 1
	}
	for _, t := range tuples {
		b.ExecParams(l.single, t, l.elems, pformats, []int16{1})
	}
	mrr := tx.Conn().PgConn().ExecBatch(ctx, b)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		if err := l.checkColumns(rr.FieldDescriptions()); err != nil {
			_, _ = rr.Close()
			_ = mrr.Close()
			return err
		}
		for rr.NextRow() {
			if err := each(rr.Values()); err != nil {
				_, _ = rr.Close()
				_ = mrr.Close()
				return err
			}
		}
		if _, err := rr.Close(); err != nil {
			_ = mrr.Close()
			return err
		}
	}
	return mrr.Close()
}
