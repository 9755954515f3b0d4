package daemon

import (
	"context"
	"log/slog"
	"time"
)

// DefaultReloadInterval is how often Watch reads the files again.
const DefaultReloadInterval = 5 * time.Second

// Reloadable is something loaded from files that Watch keeps current: TokenSet, TLSFiles.
type Reloadable interface {
	// Reload reads the files again; changed reports a new content now in use. An error
	// says what is in use instead: TLSFiles keep the previous certificate, a TokenSet fails
	// closed (what it keeps is in its error).
	Reload() (changed bool, err error)
	// Name is the configuration field, for the log.
	Name() string
}

// Watch reloads each of rs every interval until ctx ends. Files are compared by content
// (not by time stamps: a Kubernetes secret volume swaps a symlink), so an unchanged file
// costs a read. A change is logged at Info, a failure at Error (once until it changes; its
// error says what is in use meanwhile); neither log line holds the files' content.
func Watch(ctx context.Context, interval time.Duration, log *slog.Logger, rs ...Reloadable) {
	if len(rs) == 0 {
		return
	}
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := make([]string, len(rs)) // the last error logged of each: a missing file is logged once
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for i, r := range rs {
				changed, err := r.Reload()
				switch {
				case err != nil:
					if err.Error() != last[i] {
						log.Error("reload failed", "field", r.Name(), "err", err)
					}
					last[i] = err.Error()
				case changed:
					log.Info("reloaded", "field", r.Name())
					last[i] = ""
				default:
					last[i] = ""
				}
			}
		}
	}
}
