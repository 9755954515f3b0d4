package daemon

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// NewLogger returns a daemon's logger: JSON lines on w from level up, with durations
// written as Go durations ("1.5s", "250ms") rather than integer nanoseconds
// (ReadableDurations).
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: ReadableDurations}))
}

// ReadableDurations is a slog.HandlerOptions.ReplaceAttr that writes a time.Duration as its
// String ("1m30s"), in groups too: slog's JSON handler would write it as an integer of
// nanoseconds, which a reader of the log has to convert.
func ReadableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// runLogged runs run and logs its graceful stop: "<name> stopping" with the reason when ctx
// ends (the signal that ended it), then "<name> stopped" with how long the stop took once
// run returned. An error of run is returned as it is (Main logs it).
func runLogged(ctx context.Context, env Env, run func(context.Context, Env) error) error {
	var stopAt time.Time // written by the goroutine, read after it ended
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-ctx.Done():
			stopAt = time.Now()
			env.Log.Info(env.Name+" stopping", "reason", stopReason(ctx))
		case <-done:
		}
	}()
	err := run(ctx, env)
	close(done)
	<-ended
	switch {
	case err != nil:
	case stopAt.IsZero():
		env.Log.Info(env.Name + " stopped")
	default:
		env.Log.Info(env.Name+" stopped", "took", time.Since(stopAt))
	}
	return err
}

// stopReason says why ctx ended: its cause (signal.NotifyContext's names the signal).
func stopReason(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && c != context.Canceled { // not errors.Is: a signal's cause Is Canceled too
		return c.Error()
	}
	return "canceled"
}
