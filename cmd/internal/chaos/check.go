package chaos

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/checker"
)

// converge waits until every client reflects the last commit (WaitFor the WAL insert
// position taken after the writers stopped) and returns the time since lastHeal at which
// the last one did (-1 when one never did: a violation).
func (r *run) converge(ctx context.Context, lastHeal time.Time) (time.Duration, error) {
	var lsn string
	if err := r.pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return -1, err
	}
	r.logf("waiting for every client to reflect %s", lsn)
	var mu sync.Mutex
	var last time.Time
	never := false
	var wg sync.WaitGroup
	for _, p := range r.clients {
		wg.Go(func() {
			deadline := time.Now().Add(r.cfg.ConvergeTimeout)
			var lastErr string
			for time.Now().Before(deadline) && ctx.Err() == nil {
				var res WaitResult
				q := url.Values{"lsn": {lsn}, "timeout": {"5s"}}
				err := r.getJSON(r.http[p.name], "/wait?"+q.Encode(), &res)
				if err == nil && res.Err == "" {
					mu.Lock()
					if now := time.Now(); now.After(last) {
						last = now
					}
					mu.Unlock()
					return
				}
				if err != nil {
					lastErr = err.Error()
				} else {
					lastErr = res.Err
				}
				sleep(ctx, 500*time.Millisecond)
			}
			st, _ := r.clientState(p.name)
			mu.Lock()
			never = true
			mu.Unlock()
			r.violate(Violation{Kind: "converge", Where: p.name, Want: "source position " + lsn, Got: "source position " + st.Source,
				Detail: fmt.Sprintf("not reached %v after the writes stopped (stream position %d, player head %d, connected %v, resyncs %d, reconnects %d, epoch mismatches %d; last answer: %s)",
					r.cfg.ConvergeTimeout, st.Position, st.Stats.Head, st.Stats.Connected, st.Stats.Resyncs, st.Stats.Reconnects, st.Stats.EpochMismatches, lastErr)})
		})
	}
	wg.Wait()
	if never {
		return -1, nil
	}
	d := last.Sub(lastHeal)
	r.logf("every client reflects %s, %v after the last fault", lsn, d.Round(100*time.Millisecond))
	return d, nil
}

// maxCrashesListed bounds the crashes listed per process; the rest are counted.
const maxCrashesListed = 3

// maxListed bounds the rows listed per client and view; the rest are counted.
const maxListed = 10

// compareViews compares every client's every view, row by row, with the view's SQL run on
// PostgreSQL, and checks the clients' indexes.
func (r *run) compareViews(ctx context.Context) error {
	want := map[string]map[string]string{}
	for _, v := range views {
		rows, err := r.sqlRows(ctx, v)
		if err != nil {
			return err
		}
		want[v.Name] = rows
	}
	for _, p := range r.clients {
		var d Dump
		if err := r.getJSON(r.http[p.name], "/dump", &d); err != nil {
			r.violate(Violation{Kind: "view", Where: p.name, Detail: "no dump: " + err.Error()})
			continue
		}
		for _, e := range d.IndexErrors {
			r.violate(Violation{Kind: "index", Where: p.name, Detail: e})
		}
		for _, view := range r.views[p.name] {
			got, exp := d.Views[view], want[view]
			var keys []string
			for k := range exp {
				if got[k] != exp[k] {
					keys = append(keys, k)
				}
			}
			for k := range got {
				if _, ok := exp[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for i, k := range keys {
				if i == maxListed {
					r.violate(Violation{Kind: "view", Where: p.name, View: view, Detail: fmt.Sprintf("and %d more rows differ", len(keys)-maxListed)})
					break
				}
				r.violate(Violation{Kind: "view", Where: p.name, View: view, Key: k, Want: exp[k], Got: got[k],
					Detail: fmt.Sprintf("client at position %d, source %s; the key's last records in the stream:\n      %s",
						d.Position, d.Source, strings.Join(r.tap.history(view, k, 4), "\n      "))})
			}
			if len(keys) == 0 {
				r.logf("%s view %s: %d rows equal to PostgreSQL", p.name, view, len(got))
			}
		}
	}
	return nil
}

// sqlRows runs a view's SQL: key text → canonical row.
func (r *run) sqlRows(ctx context.Context, v viewDef) (map[string]string, error) {
	cols := make([]string, len(v.Key))
	for i, k := range v.Key {
		cols[i] = "chaos_row." + k + "::text"
	}
	rows, err := r.pool.Query(ctx, "SELECT "+strings.Join(cols, ", ")+", to_jsonb(chaos_row)::text FROM ("+v.SQL+") chaos_row")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(v.Key))
		for i := range v.Key {
			parts[i] = vals[i].(string)
		}
		c, err := canonical([]byte(vals[len(v.Key)].(string)))
		if err != nil {
			return nil, err
		}
		out[cacheclient.Key(parts...)] = c
	}
	return out, rows.Err()
}

// checkDelivery stops the distributors (the stream stops growing), waits until every
// client caught up with the stream's end, stops the clients and the players, and runs the
// delivery checker over what each client received against the topic.
func (r *run) checkDelivery(ctx context.Context) error {
	for _, p := range r.dists {
		p.stop(10 * time.Second)
	}
	truth, err := checker.ReadTopic(ctx, r.kafka.Brokers, streamName)
	if err != nil {
		return err
	}
	last := int64(-1)
	if len(truth) > 0 {
		last = truth[len(truth)-1].Index
	}
	r.logf("the stream holds %d records up to index %d; waiting for the clients to reach it", len(truth), last)
	for _, p := range r.clients {
		_ = r.waitFor(ctx, time.Minute, p.name+" at the stream's end", func() bool {
			st, err := r.clientState(p.name)
			return err == nil && st.Position >= last
		})
	}
	for _, p := range append(slices.Clone(r.clients), r.players...) {
		p.stop(10 * time.Second)
	}
	chk := checker.New(checker.Options{AllowCompacted: true})
	for _, p := range r.clients {
		if err := replayEvents(chk, p.name, filepath.Join(r.dir, "events", p.name+".jsonl")); err != nil {
			return err
		}
	}
	vs := chk.Violations(truth)
	for _, v := range vs {
		r.violate(Violation{Kind: "delivery/" + string(v.Guarantee), Where: v.Target, Detail: fmt.Sprintf("session %d: %s", v.Session, v.Detail)})
	}
	if len(vs) == 0 {
		r.logf("delivery checker: every client's deliveries ordered, unique, resumable and reliable")
	}
	return nil
}

// checkProcesses reports panics and races in the logs and memory over budget (crashes
// were reported as they happened).
func (r *run) checkProcesses() {
	names := make([]string, 0, len(r.procs))
	for n := range r.procs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := r.procs[n]
		for _, prob := range logProblems(p.log) {
			r.violate(Violation{Kind: "panic", Where: n, Detail: prob})
		}
		if len(p.crashes) > maxCrashesListed {
			r.violate(Violation{Kind: "crash", Where: n, Detail: fmt.Sprintf("and %d more crashes", len(p.crashes)-maxCrashesListed)})
		}
		budget := int64(0)
		switch p.kind {
		case "player":
			budget = r.cfg.PlayerRSS
		case "client":
			budget = r.cfg.ClientRSS
		}
		if budget > 0 && p.maxRSS > budget {
			r.violate(Violation{Kind: "memory", Where: n, Want: fmt.Sprintf("at most %d MiB", budget>>20), Got: fmt.Sprintf("%d MiB", p.maxRSS>>20),
				Detail: "resident set over the budget"})
		}
		r.logf("%s: %d starts, max RSS %d MiB", n, p.starts, p.maxRSS>>20)
	}
}
