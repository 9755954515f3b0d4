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
		sql := strings.Join(strings.Fields(c.sql), " ")
		if len(sql) > 160 {
			sql = sql[:160] + " …"
		}
		fmt.Fprintf(r.out, "   sql> %s\n", sql)
		at, err := applyChange(ctx, conn, c)
		if err != nil {
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
		if werr == nil {
			// Every view has read the database since the change (a change may republish
			// rows of other views too: the join view's updated_at), and the cache has
			// applied what they published.
			werr = poll(ctx, r.o.CheckTimeout, func() bool {
				off, ok := r.fencedAfter(d.Views(), at)
				return ok && svc.s.Client.Position() >= off
			})
		}
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
