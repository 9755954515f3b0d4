package chaos

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/internal/testenv"
)

// TestWorkloadModel checks the workload's own assumptions on a real database, without
// faults: each writer's model of its partition stays exact (no transaction fails), rows
// stay in their writer's partition, and the sum of each writer's balances never changes
// (what the atomicity probe relies on).
func TestWorkloadModel(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const writers = 3
	if err := seedData(ctx, pool, writers); err != nil {
		t.Fatal(err)
	}
	want, err := partitionSums(ctx, pool, writers)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{pool: pool, cfg: Config{Writers: writers}}
	kinds := map[string]int{}
	for w := range writers {
		rng := rand.New(rand.NewPCG(7, uint64(w)))
		p, err := loadPartition(ctx, pool, w, writers)
		if err != nil {
			t.Fatal(err)
		}
		for range 600 {
			tx := p.nextTxn(rng, w, writers)
			if _, err := r.exec(ctx, tx, false); err != nil {
				t.Fatalf("writer %d: %s transaction failed: %v", w, tx.name, err)
			}
			if tx.after != nil {
				tx.after()
			}
			kinds[tx.name]++
			if got, err := partitionSums(ctx, pool, writers); err != nil || !slices.Equal(got, want) {
				t.Fatalf("writer %d: after a %s transaction %q the sums are %v, want %v (%v)", w, tx.name, tx.stmts, got, want, err)
			}
		}
	}
	var outside int
	if err := pool.QueryRow(ctx, `SELECT
	  (SELECT count(*) FROM items i WHERE i.id % 3 <> i.category_id % 3) +
	  (SELECT count(*) FROM order_lines l WHERE l.order_id % 3 <> l.item_id % 3)`).Scan(&outside); err != nil || outside != 0 {
		t.Fatalf("%d rows outside their writer's partition (%v)", outside, err)
	}
	if len(kinds) < 14 {
		t.Errorf("only %d kinds of transactions drawn: %v", len(kinds), kinds)
	}
	t.Logf("transactions: %v", kinds)
}
