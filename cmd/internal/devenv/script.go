package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/statecast/statecast/examples/sportsbook"
)

// script applies the scripted changes, one per Step, and shows each one's way: the records
// published, then (once the service's cache reflects the commit) the service's log and
// HTTP answers.
func (r *run) script(ctx context.Context, svc *runningService) error {
	conn, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i, c := range demoChanges {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.o.Step):
		}
		r.say("change %d/%d: %s", i+1, len(demoChanges), c.what)
		sql := strings.Join(strings.Fields(c.sql), " ")
		if len(sql) > 160 {
			sql = sql[:160] + " …"
		}
		fmt.Fprintf(r.out, "   sql> %s\n", sql)
		epochs := r.epochs.Load()
		pos, err := applyChange(ctx, conn, c)
		if err != nil {
			return err
		}
		committed := time.Now()
		// Read-your-writes: once the cache's source position reaches the WAL position read
		// after the COMMIT, every view reflects the change.
		wctx, cancel := context.WithTimeout(ctx, r.o.CheckTimeout)
		werr := svc.s.Client.WaitFor(wctx, pos)
		cancel()
		took := time.Since(committed)
		if werr != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := r.waitTail(ctx); err != nil {
			return err
		}
		switch {
		case errors.Is(werr, context.DeadlineExceeded):
			r.failed = append(r.failed, fmt.Sprintf("change %d not in the cache after %v", i+1, r.o.CheckTimeout))
			r.say("NOT in the sportsbook cache after %v (source position %s not reached); it answers:", r.o.CheckTimeout, pos)
		case werr != nil:
			r.failed = append(r.failed, fmt.Sprintf("change %d: %v", i+1, werr))
			r.say("the sportsbook cache cannot show it: %v; it answers:", werr)
		case !c.inCache(svc.s):
			r.failed = append(r.failed, fmt.Sprintf("change %d: the cache reached source position %s without it", i+1, pos))
			r.say("the sportsbook cache reached source position %s but does NOT show the change; it answers:", pos)
		default:
			r.say("in the sportsbook cache %v after the commit (WaitFor source position %s); it answers:", took.Round(time.Millisecond), pos)
		}
		if c.delete && werr == nil {
			if n := r.epochs.Load() - epochs; n == 0 {
				r.say("the delete came from the WAL: its tombstones are the source transaction of its commit; no reconcile epoch ran")
			} else {
				r.say("%d epoch(s) ran meanwhile: the tombstones may come from a full read", n)
			}
		}
		if c.onChange != "" {
			// The OnChange handler runs just after the batch is published.
			_ = poll(ctx, time.Second, func() bool { return r.sink.count(c.onChange) > 0 })
		}
		r.sink.flush(r.out, logPrefix, 8)
		for _, p := range c.show {
			if err := showHTTP(ctx, r.out, svc.url, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// rywRequests are the read-your-writes requests of the demo: each writes one row through
// the service, which answers from its cache; check says whether the answer shows the write.
var rywRequests = []struct {
	what, path, body string
	check            func(body []byte) bool
}{
	{"a new price for the Draw of Arsenal v Liverpool", "/selections/100012/price", `{"price": "3.750"}`, func(b []byte) bool {
		var a sportsbook.WriteAnswer[sportsbook.Selection]
		return json.Unmarshal(b, &a) == nil && a.Row.ID == 100012 && a.Row.Price == "3.750"
	}},
	{"Nadal v Djokovic is live: its Match Odds market suspended (join view event_markets)", "/markets/10031/suspend", "", func(b []byte) bool {
		var a sportsbook.WriteAnswer[sportsbook.Market]
		return json.Unmarshal(b, &a) == nil && a.Row.MarketID == 10031 && a.Row.Suspended
	}},
}

// readYourWrites sends the read-your-writes requests to the service over HTTP and prints
// the command, the records its write published and the answer.
func (r *run) readYourWrites(ctx context.Context, svc *runningService) error {
	r.say("read-your-writes: the service writes to PostgreSQL, reads the WAL position after its COMMIT on the same connection, waits for it (WaitFor) and answers from its cache")
	for _, q := range rywRequests {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.o.Step):
		}
		data := ""
		if q.body != "" {
			data = fmt.Sprintf(" -d '%s'", q.body)
		}
		fmt.Fprintf(r.out, "   %s:\n   $ curl -X POST %s%s%s\n", q.what, svc.url, q.path, data)
		code, body, err := httpDo(ctx, http.MethodPost, svc.url+q.path, q.body)
		if err != nil {
			return fmt.Errorf("devenv: POST %s: %w", q.path, err)
		}
		if err := r.waitTail(ctx); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "   → %d %s\n", code, strings.TrimSpace(string(body)))
		if code != http.StatusOK || !q.check(body) {
			r.failed = append(r.failed, fmt.Sprintf("POST %s answered %d without the write", q.path, code))
			r.say("the answer does NOT show the write")
		}
		r.sink.flush(r.out, logPrefix, 8)
	}
	return nil
}
