package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL carries a constant through a join's equality into an aggregated, DISTINCT or
// windowed subquery (its equivalence classes: e.id = 5 and e.id = ms.event_id make
// ms.event_id = 5), but not an array: for a view that joins back an aggregate (a CTE of
// counts per event joined to events), cols = ANY(values) filters the subquery's output
// after computing all of it, while cols = value reads only that value's rows. And for a
// few hundred values of a join's key the planner often prefers scanning whole tables into
// a hash join to reading each value's rows by index (its random_page_cost assumes pages
// on disk). Reading the tuples one at a time (eachSQL) costs each tuple what one tuple's
// lookup costs; reading them by arrays costs at most what the whole view costs. Plan asks
// the planner for both and sets the crossover.

// eachOverhead is what one more tuple read one at a time costs beside its plan's estimate
// (its row of the unnested arrays and the subquery's rescan), in the planner's cost units.
const eachOverhead = 1

// maxPerValue bounds the tuples read one at a time in one lookup.
const maxPerValue = lookupChunk

var planSeq atomic.Int64

// Plan sets up to how many tuples l reads them one tuple at a time, from the estimated
// total costs of two generic plans in tx: the lookup of one tuple, and the view's whole
// query. n tuples read one at a time cost about n times the first; by arrays, at most the
// second (the condition does not always reach the view's tables).
func (l *Lookup) Plan(ctx context.Context, tx pgx.Tx) error {
	if l.single == "" {
		return nil
	}
	whole, err := genericCost(ctx, tx, l.view, nil)
	if err != nil {
		return err
	}
	one, err := genericCost(ctx, tx, l.single, l.elems)
	if err != nil {
		return err
	}
	n := int(whole / (one + eachOverhead))
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
	if decl != "" {
		decl = " (" + decl + ")"
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("PREPARE %s%s AS %s", name, decl, sql)); err != nil {
		return 0, fmt.Errorf("%w: plan of a lookup: %w", ErrAnalyze, err)
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "DEALLOCATE "+name) }()
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return 0, err
	}
	defer func() { _, _ = tx.Exec(context.WithoutCancel(ctx), "SET LOCAL plan_cache_mode = auto") }()
	var out string
	if args != "" {
		args = "(" + args + ")"
	}
	if err := tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (FORMAT JSON) EXECUTE %s%s", name, args)).Scan(&out); err != nil {
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
