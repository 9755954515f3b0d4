package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// writer runs writer w until ctx ends, pacing its changes at rate per second.
func (r *run) writer(ctx context.Context, w int, rate float64) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(w)+1))
	var p *partition
	pc := &pacer{start: time.Now(), rate: rate}
	for ctx.Err() == nil {
		if p == nil {
			var err error
			if p, err = loadPartition(ctx, r.pool, w, r.cfg.Writers); err != nil {
				p = nil
				sleep(ctx, 500*time.Millisecond)
				continue
			}
		}
		t := p.nextTxn(rng, w, r.cfg.Writers)
		n, err := r.exec(ctx, t, rng.IntN(8) == 0)
		if err != nil {
			r.ws.errors.Add(1)
			p = nil // the commit's outcome may be unknown: read the partition again
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if t.after != nil {
			t.after()
		}
		r.ws.changes.Add(n)
		r.ws.txns.Add(1)
		pc.wait(ctx, n)
	}
}

// exec runs one transaction and, when ryw, checks read-your-writes on a client.
func (r *run) exec(ctx context.Context, t txn, ryw bool) (int64, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range t.stmts {
		tag, err := tx.Exec(ctx, s)
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return 0, fmt.Errorf("%s: %w", s, err)
		}
		n += tag.RowsAffected()
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	if ryw && len(t.touched) > 0 {
		r.checkRYW(ctx, conn, t)
	}
	return n, nil
}

// checkRYW takes the WAL insert position after the commit (same connection), reads the
// rows the transaction touched (nobody else changes them), and asks a client that holds
// their views to WaitFor the position and read them from one Cut.
func (r *run) checkRYW(ctx context.Context, conn *pgxpool.Conn, t txn) {
	var lsn string
	err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
	var want map[string]string
	if err == nil {
		want, err = expectRows(ctx, conn, t.touched)
	}
	if err != nil {
		// A fault may cut the connection after the commit; any other error is the
		// harness's own and must not pass unseen: the first few are logged.
		if n := r.ws.rywSkipped.Add(1); n <= 3 {
			r.logf("read-your-writes check skipped: reading the expected rows: %v", err)
		}
		return
	}
	var cands []string
	for _, p := range r.clients {
		if slices.ContainsFunc(t.touched, func(k viewKey) bool { return !slices.Contains(r.views[p.name], k.view) }) {
			continue
		}
		cands = append(cands, p.name)
	}
	if len(cands) == 0 {
		return
	}
	client := cands[rand.IntN(len(cands))]
	q := url.Values{"lsn": {lsn}, "timeout": {"5s"}}
	seen := map[string]bool{}
	for _, k := range t.touched {
		if vk := k.view + " " + k.text(); !seen[vk] {
			seen[vk] = true
			q.Add("row", vk)
		}
	}
	var res WaitResult
	if err := r.getJSON(r.http[client], "/wait?"+q.Encode(), &res); err != nil || res.Err != "" {
		r.ws.rywSkipped.Add(1)
		return
	}
	r.ws.rywChecks.Add(1)
	for vk := range seen {
		if want[vk] != res.Rows[vk] {
			view, key, _ := strings.Cut(vk, " ")
			r.violate(Violation{Kind: "read-your-writes", Where: client, View: view, Key: key, Want: want[vk], Got: res.Rows[vk],
				Detail: fmt.Sprintf("after WaitFor(%s) returned (client at position %d, source %s), following a %s transaction", lsn, res.Position, res.Source, t.name)})
		}
	}
}

// atomicProbe reads, from one Cut of a client at a time, the sum of each writer's account
// balances: transfers keep it, so any other sum is a Cut showing part of a transaction.
func (r *run) atomicProbe(ctx context.Context) {
	var cands []string
	for _, p := range r.clients {
		if slices.Contains(r.views[p.name], "accounts") {
			cands = append(cands, p.name)
		}
	}
	reported := map[string]bool{}
	for sleep(ctx, 250*time.Millisecond) {
		c := cands[rand.IntN(len(cands))]
		var s Sums
		if err := r.getJSON(r.http[c], fmt.Sprintf("/sums?view=accounts&mod=%d", r.cfg.Writers), &s); err != nil || !s.Ready {
			continue
		}
		r.ws.atomicChecks.Add(1)
		if !slices.Equal(s.Sums, r.sums) && !reported[c] {
			reported[c] = true // once per client: a broken Cut repeats until the next write
			r.logf("%s: a Cut at position %d shows the writers' balances summing to %v, not %v (explained at the end)", c, s.Position, s.Sums, r.sums)
			r.mu.Lock()
			r.atomics = append(r.atomics, atomicCase{client: c, pos: s.Position, got: s.Sums})
			r.mu.Unlock()
		}
	}
}
