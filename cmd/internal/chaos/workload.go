package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
)

// The writer workload: W writers, writer w owning every row whose id (order id for order
// lines) is w modulo W, and items only in its own categories and lines only of its own
// items. Each writer is thus the only one that changes the rows its views' rows depend
// on, so right after its commit it knows what those view rows are (it reads them back
// from PostgreSQL on its own connection) and can check a client's read-your-writes
// exactly. Money only moves between a writer's accounts, so the sum of the balances of
// its accounts never changes: a client whose Cut shows another sum shows part of a
// transaction (atomic).

// Initial sizes.
const (
	initAccounts   = 300
	initCategories = 30
	initItems      = 600
	initOrders     = 150
	initBalance    = 1000
)

// seedData fills the tables: the partitions of W writers.
func seedData(ctx context.Context, pool *pgxpool.Pool, writers int) error {
	w := strconv.Itoa(writers)
	_, err := pool.Exec(ctx, schema+`
INSERT INTO accounts SELECT i, 'owner' || (i % 7), `+strconv.Itoa(initBalance)+`, true FROM generate_series(1, `+strconv.Itoa(initAccounts)+`) i;
INSERT INTO categories SELECT i, 'cat' || i, i % 20 FROM generate_series(1, `+strconv.Itoa(initCategories)+`) i;
-- item i's category: one of its writer's (i mod W), the lowest categories being 1..W
INSERT INTO items SELECT i, ((i % `+w+`) + `+w+` * (i % (`+strconv.Itoa(initCategories)+` / `+w+`))) + CASE WHEN i % `+w+` = 0 THEN `+w+` ELSE 0 END,
  'item' || i, 100 + i, 10 FROM generate_series(1, `+strconv.Itoa(initItems)+`) i;
INSERT INTO order_lines SELECT o, l, ((o % `+w+`) + `+w+` * ((o * 7 + l) % (`+strconv.Itoa(initItems)+` / `+w+` - 1))) + CASE WHEN o % `+w+` = 0 THEN `+w+` ELSE 0 END, l
  FROM generate_series(1, `+strconv.Itoa(initOrders)+`) o, generate_series(1, 1 + o % 4) l;
`)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	// The formulas above keep every row in its writer's partition; check it.
	var bad int
	if err := pool.QueryRow(ctx, `SELECT
	  (SELECT count(*) FROM items i WHERE i.id % `+w+` <> i.category_id % `+w+`) +
	  (SELECT count(*) FROM order_lines l WHERE l.order_id % `+w+` <> l.item_id % `+w+`) +
	  (SELECT count(*) FROM items i LEFT JOIN categories c ON c.id = i.category_id WHERE c.id IS NULL) +
	  (SELECT count(*) FROM order_lines l LEFT JOIN items i ON i.id = l.item_id WHERE i.id IS NULL)`).Scan(&bad); err != nil {
		return err
	}
	if bad != 0 {
		return fmt.Errorf("seed: %d rows outside their writer's partition", bad)
	}
	return nil
}

// partitionSums returns the sum of the balances of each writer's accounts.
func partitionSums(ctx context.Context, pool *pgxpool.Pool, writers int) ([]int64, error) {
	out := make([]int64, writers)
	rows, err := pool.Query(ctx, "SELECT id % $1, sum(balance)::bigint FROM accounts GROUP BY 1", writers)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p int
		var s int64
		if err := rows.Scan(&p, &s); err != nil {
			return nil, err
		}
		out[p] = s
	}
	return out, rows.Err()
}

// partition is what writer w knows of its rows (reloaded from PostgreSQL after an error,
// when a commit's outcome may be unknown).
type partition struct {
	accounts   []int
	categories []int
	gone       []int       // deleted categories, to insert again
	items      map[int]int // id → category
	orders     map[int]int // order id → its number of lines
	next       int         // the next new id of the partition (id ≡ w)
}

func loadPartition(ctx context.Context, pool *pgxpool.Pool, w, writers int) (*partition, error) {
	p := &partition{items: map[int]int{}, orders: map[int]int{}}
	ints := func(sql string) ([]int, error) {
		rows, err := pool.Query(ctx, sql, writers, w)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int])
	}
	var err error
	if p.accounts, err = ints("SELECT id FROM accounts WHERE id % $1 = $2 ORDER BY id"); err != nil {
		return nil, err
	}
	if p.categories, err = ints("SELECT id FROM categories WHERE id % $1 = $2 ORDER BY id"); err != nil {
		return nil, err
	}
	for c := w; c <= initCategories+writers; c += writers {
		if c > 0 && c <= initCategories && !slices.Contains(p.categories, c) {
			p.gone = append(p.gone, c)
		}
	}
	rows, err := pool.Query(ctx, "SELECT id, category_id FROM items WHERE id % $1 = $2", writers, w)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, c int
		if err := rows.Scan(&id, &c); err != nil {
			rows.Close()
			return nil, err
		}
		p.items[id] = c
	}
	rows.Close()
	rows, err = pool.Query(ctx, "SELECT order_id, max(line) FROM order_lines WHERE order_id % $1 = $2 GROUP BY 1", writers, w)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var o, n int
		if err := rows.Scan(&o, &n); err != nil {
			rows.Close()
			return nil, err
		}
		p.orders[o] = n
	}
	rows.Close()
	var maxID int
	if err := pool.QueryRow(ctx, "SELECT greatest((SELECT max(id) FROM accounts), (SELECT max(id) FROM items), (SELECT max(order_id) FROM order_lines), 0)").Scan(&maxID); err != nil {
		return nil, err
	}
	p.next = maxID + writers - maxID%writers + w
	for p.next <= maxID {
		p.next += writers
	}
	return p, nil
}

func (p *partition) newID(writers int) int {
	id := p.next
	p.next += writers
	return id
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func anyKey(r *rand.Rand, m map[int]int) (int, bool) {
	if len(m) == 0 {
		return 0, false
	}
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return pick(r, keys), true
}

// viewKey is one row of a view, as a client names it.
type viewKey struct {
	view string
	key  []any // the key columns' values
}

func (k viewKey) text() string {
	parts := make([]string, len(k.key))
	for i, v := range k.key {
		parts[i] = fmt.Sprint(v)
	}
	return cacheclient.Key(parts...)
}

// txn is one transaction of a writer: statements, and the view rows they touch.
type txn struct {
	name    string
	stmts   []string
	touched []viewKey
	after   func() // updates the partition once committed
}

// nextTxn picks a transaction for writer w.
func (p *partition) nextTxn(r *rand.Rand, w, writers int) txn { return p.draw(r, w, writers, true) }

// draw picks a transaction; a mixed one (several in one) only when mix.
func (p *partition) draw(r *rand.Rand, w, writers int, mix bool) txn {
	acct := func(id int) []viewKey {
		return []viewKey{{"accounts", []any{id}}, {"rich", []any{id}}}
	}
	for {
		switch n := r.IntN(100); {
		case n < 28 && len(p.accounts) >= 2: // transfer
			a, b := pick(r, p.accounts), pick(r, p.accounts)
			if a == b {
				continue
			}
			x := 1 + r.IntN(600)
			return txn{name: "transfer", stmts: []string{
				fmt.Sprintf("UPDATE accounts SET balance = balance - %d, v = nextval('chaos_v') WHERE id = %d", x, a),
				fmt.Sprintf("UPDATE accounts SET balance = balance + %d, v = nextval('chaos_v') WHERE id = %d", x, b)},
				touched: append(acct(a), acct(b)...)}
		case n < 32 && len(p.accounts) >= 1: // open an account with money from another
			a, id, x := pick(r, p.accounts), p.newID(writers), 1+r.IntN(900)
			return txn{name: "open", stmts: []string{
				fmt.Sprintf("UPDATE accounts SET balance = balance - %d, v = nextval('chaos_v') WHERE id = %d", x, a),
				fmt.Sprintf("INSERT INTO accounts VALUES (%d, 'owner%d', %d, true)", id, r.IntN(7), x)},
				touched: append(acct(a), acct(id)...), after: func() { p.accounts = append(p.accounts, id) }}
		case n < 35 && len(p.accounts) >= 3: // close an account, its money to another
			d, a := pick(r, p.accounts), pick(r, p.accounts)
			if a == d {
				continue
			}
			return txn{name: "close", stmts: []string{
				fmt.Sprintf("UPDATE accounts SET balance = balance + (SELECT balance FROM accounts WHERE id = %d), v = nextval('chaos_v') WHERE id = %d", d, a),
				fmt.Sprintf("DELETE FROM accounts WHERE id = %d", d)},
				touched: append(acct(a), acct(d)...), after: func() { p.accounts = slices.DeleteFunc(p.accounts, func(x int) bool { return x == d }) }}
		case n < 41 && len(p.accounts) >= 1: // toggle active or rename the owner
			a := pick(r, p.accounts)
			s := fmt.Sprintf("UPDATE accounts SET active = NOT active, v = nextval('chaos_v') WHERE id = %d", a)
			if r.IntN(2) == 0 {
				s = fmt.Sprintf("UPDATE accounts SET owner = 'owner%d', v = nextval('chaos_v') WHERE id = %d", r.IntN(7), a)
			}
			return txn{name: "account", stmts: []string{s}, touched: acct(a)}
		case n < 45 && len(p.categories) >= 1: // a category changes: every item row of it changes
			c := pick(r, p.categories)
			return txn{name: "category", stmts: []string{
				fmt.Sprintf("UPDATE categories SET name = 'cat%d-%d', discount = %d, v = nextval('chaos_v') WHERE id = %d", c, r.IntN(1000), r.IntN(50), c)},
				touched: p.itemsOf(c)}
		case n < 46 && len(p.categories) >= 2: // a category goes: its items leave the join
			c := pick(r, p.categories)
			return txn{name: "category-delete", stmts: []string{fmt.Sprintf("DELETE FROM categories WHERE id = %d", c)},
				touched: p.itemsOf(c), after: func() {
					p.categories = slices.DeleteFunc(p.categories, func(x int) bool { return x == c })
					p.gone = append(p.gone, c)
				}}
		case n < 48 && len(p.gone) >= 1: // and comes back: they join again
			c := pick(r, p.gone)
			return txn{name: "category-insert", stmts: []string{fmt.Sprintf("INSERT INTO categories VALUES (%d, 'cat%d', %d)", c, c, r.IntN(50))},
				touched: p.itemsOf(c), after: func() {
					p.gone = slices.DeleteFunc(p.gone, func(x int) bool { return x == c })
					p.categories = append(p.categories, c)
				}}
		case n < 54 && len(p.categories) >= 1: // a new item
			id, c := p.newID(writers), pick(r, p.categories)
			return txn{name: "item-insert", stmts: []string{
				fmt.Sprintf("INSERT INTO items VALUES (%d, %d, 'item%d', %d, %d)", id, c, id, 50+r.IntN(500), r.IntN(20))},
				touched: []viewKey{{"items", []any{id}}}, after: func() { p.items[id] = c }}
		case n < 64: // an item's price or stock
			id, ok := anyKey(r, p.items)
			if !ok {
				continue
			}
			return txn{name: "item-update", stmts: []string{
				fmt.Sprintf("UPDATE items SET price = %d, stock = stock + %d, v = nextval('chaos_v') WHERE id = %d", 50+r.IntN(500), r.IntN(5)-2, id)},
				touched: []viewKey{{"items", []any{id}}}}
		case n < 68 && len(p.categories) >= 2: // an item moves to another category
			id, ok := anyKey(r, p.items)
			if !ok {
				continue
			}
			c := pick(r, p.categories)
			return txn{name: "item-move", stmts: []string{fmt.Sprintf("UPDATE items SET category_id = %d, v = nextval('chaos_v') WHERE id = %d", c, id)},
				touched: []viewKey{{"items", []any{id}}}, after: func() { p.items[id] = c }}
		case n < 71 && len(p.items) > 20: // an item goes (its order lines leave the priced join)
			id, _ := anyKey(r, p.items)
			return txn{name: "item-delete", stmts: []string{fmt.Sprintf("DELETE FROM items WHERE id = %d", id)},
				touched: []viewKey{{"items", []any{id}}}, after: func() { delete(p.items, id) }}
		case n < 80: // a new order of several lines: one transaction
			o, k := p.newID(writers), 1+r.IntN(5)
			t := txn{name: "order", after: func() { p.orders[o] = k }}
			for l := 1; l <= k; l++ {
				it, ok := anyKey(r, p.items)
				if !ok {
					break
				}
				t.stmts = append(t.stmts, fmt.Sprintf("INSERT INTO order_lines VALUES (%d, %d, %d, %d)", o, l, it, 1+r.IntN(9)))
				t.touched = append(t.touched, viewKey{"lines", []any{o, l}}, viewKey{"priced_lines", []any{o, l}})
			}
			if len(t.stmts) == 0 {
				continue
			}
			return t
		case n < 88: // a line's quantity
			o, ok := anyKey(r, p.orders)
			if !ok {
				continue
			}
			l := 1 + r.IntN(p.orders[o])
			return txn{name: "line-update", stmts: []string{
				fmt.Sprintf("UPDATE order_lines SET qty = qty + 1, v = nextval('chaos_v') WHERE order_id = %d AND line = %d", o, l)},
				touched: []viewKey{{"lines", []any{o, l}}, {"priced_lines", []any{o, l}}}}
		case n < 93: // an order goes, all its lines
			o, ok := anyKey(r, p.orders)
			if !ok || len(p.orders) < 10 {
				continue
			}
			t := txn{name: "order-delete", stmts: []string{fmt.Sprintf("DELETE FROM order_lines WHERE order_id = %d", o)},
				after: func() { delete(p.orders, o) }}
			for l := 1; l <= p.orders[o]; l++ {
				t.touched = append(t.touched, viewKey{"lines", []any{o, l}}, viewKey{"priced_lines", []any{o, l}})
			}
			return t
		case !mix:
			continue
		default: // several of the above in one transaction
			t := txn{name: "mixed"}
			for range 2 + r.IntN(3) {
				s := p.draw(r, w, writers, false)
				t.stmts = append(t.stmts, s.stmts...)
				t.touched = append(t.touched, s.touched...)
				if s.after != nil {
					// At once: the next part draws from the partition as this one leaves
					// it (a failed commit reloads the partition).
					s.after()
				}
			}
			return t
		}
	}
}

// itemsOf returns the items view rows of a category's items (at most 20 of them).
func (p *partition) itemsOf(c int) []viewKey {
	var out []viewKey
	for id, cat := range p.items {
		if cat == c && len(out) < 20 {
			out = append(out, viewKey{"items", []any{id}})
		}
	}
	return out
}

// expectRows reads the rows of the touched views' keys from PostgreSQL on conn: key text
// ("view key") → canonical row; absent rows are missing.
func expectRows(ctx context.Context, conn *pgxpool.Conn, keys []viewKey) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		def := viewByName(k.view)
		conds := make([]string, len(def.Key))
		for i, c := range def.Key {
			conds[i] = fmt.Sprintf("chaos_row.%s = $%d", c, i+1)
		}
		var js string
		err := conn.QueryRow(ctx, "SELECT to_jsonb(chaos_row)::text FROM ("+def.SQL+") chaos_row WHERE "+strings.Join(conds, " AND "), k.key...).Scan(&js)
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := canonical([]byte(js))
		if err != nil {
			return nil, err
		}
		out[k.view+" "+k.text()] = c
	}
	return out, nil
}

// writerStats are counted by the writers.
type writerStats struct {
	changes, txns, errors atomic.Int64
	rywChecks, rywSkipped atomic.Int64
	atomicChecks          atomic.Int64
}

// pacer spaces a writer's changes at rate per second.
type pacer struct {
	start time.Time
	rate  float64
	done  float64
}

func (p *pacer) wait(ctx context.Context, n int64) {
	p.done += float64(n)
	due := p.start.Add(time.Duration(p.done / p.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}
