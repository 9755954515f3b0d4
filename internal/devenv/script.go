package devenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/statecast/statecast/distributor"
)

// script applies the scripted changes, one per Step, and shows each one's way: the records
// published, then (once the service's memory shows it) the service's log and HTTP answers.
func (r *run) script(ctx context.Context, d *distributor.Distributor, svc *runningService) error {
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
		fmt.Fprintf(r.out, "   sql> %s\n", strings.Join(strings.Fields(c.sql), " "))
		if err := applyChange(ctx, conn, c); err != nil {
			return err
		}
		committed := time.Now()
		if len(c.reconcile) > 0 {
			r.say("deletes reach the stream at a reconcile epoch (refresh_cron runs one every 30s); requesting one now")
		}
		for _, v := range c.reconcile {
			r.say("reconcile of view %s requested", v)
			if err := d.Reconcile(ctx, v); err != nil {
				return fmt.Errorf("devenv: reconcile %s: %w", v, err)
			}
			if err := r.waitTail(ctx); err != nil {
				return err
			}
		}
		werr := poll(ctx, r.o.CheckTimeout, func() bool { return c.inCache(svc.s) })
		took := time.Since(committed)
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
			return werr
		}
		if err := r.waitTail(ctx); err != nil {
			return err
		}
		if werr != nil {
			r.failed = append(r.failed, fmt.Sprintf("change %d not in the cache after %v", i+1, r.o.CheckTimeout))
			r.say("NOT in the sportsbook cache after %v; it answers:", r.o.CheckTimeout)
		} else {
			r.say("in the sportsbook cache %v after the commit; it answers:", took.Round(time.Millisecond))
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

// converge waits until every cached view and index equals its SQL query (or the check
// timeout passes) and prints the comparison and the client's epoch checks.
func (r *run) converge(ctx context.Context, svc *runningService) error {
	conn, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if r.o.beforeConverge != nil {
		if err := r.o.beforeConverge(ctx, conn); err != nil {
			return err
		}
	}
	start := time.Now()
	var checks []viewCheck
	var qerr error
	werr := poll(ctx, r.o.CheckTimeout, func() bool {
		checks, qerr = compareAll(ctx, conn, svc.s)
		if qerr != nil {
			return true
		}
		for _, c := range checks {
			if c.diff != "" {
				return false
			}
		}
		return true
	})
	if qerr != nil {
		return qerr
	}
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return werr
	}
	r.say("convergence check: each cached view and its indexes against its SQL query in PostgreSQL")
	for _, c := range checks {
		fmt.Fprintf(r.out, "   %s\n", c)
	}
	st := svc.s.Client.Stats()
	fmt.Fprintf(r.out, "   epoch-end checks in the client (row count + hash vs the distributor's): %d passed, %d mismatches; decode errors %d\n",
		st.EpochChecks-st.EpochMismatches, st.EpochMismatches, st.DecodeErrors)
	switch {
	case werr != nil:
		r.failed = append(r.failed, fmt.Sprintf("cache differs from PostgreSQL after %v", r.o.CheckTimeout))
		r.say("convergence: DIFFERS after %v", r.o.CheckTimeout)
	case st.EpochMismatches > 0 || st.DecodeErrors > 0:
		r.failed = append(r.failed, "epoch mismatches or decode errors in the client")
		r.say("convergence: views equal, but the client counted epoch mismatches or decode errors")
	default:
		r.say("convergence: OK (cache = PostgreSQL, checked in %v)", time.Since(start).Round(time.Millisecond))
	}
	r.sink.flush(r.out, logPrefix, 8)
	return nil
}

// serve keeps everything running for Duration (0: until ctx ends), printing the service's
// log as it comes (change rows in the demo database by hand and watch them arrive).
func (r *run) serve(ctx context.Context, svc *runningService) {
	if r.o.OnServing != nil {
		r.o.OnServing(ctx, svc.url)
	}
	var done <-chan time.Time
	if r.o.Duration > 0 {
		r.say("serving for %v (-for 0: until Ctrl-C); e.g. curl %s/events/1003 — or change a row with psql and watch it arrive", r.o.Duration, svc.url)
		done = time.After(r.o.Duration)
	} else {
		r.say("serving until Ctrl-C; e.g. curl %s/events/1003 — or change a row with psql and watch it arrive", svc.url)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.sink.flush(r.out, logPrefix, 0)
			return
		case <-done:
			r.sink.flush(r.out, logPrefix, 0)
			return
		case <-t.C:
			r.sink.flush(r.out, logPrefix, 0)
		}
	}
}
