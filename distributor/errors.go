package distributor

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them (test with errors.Is).
var (
	// ErrConfig: the configuration is invalid (bad YAML, unknown field, bad cron, …).
	ErrConfig = errors.New("distributor: invalid config")
	// ErrView: a view cannot be published (SQL error, missing/NULL/duplicate key, unmapped
	// column type, oversized record). Always wrapped in a *ViewError.
	ErrView = errors.New("distributor: invalid view")
	// ErrTopic: the topic exists but is not a compacted single-partition topic.
	ErrTopic = errors.New("distributor: unusable topic")
	// ErrUnknownView: Reconcile was asked for a view that is not configured.
	ErrUnknownView = errors.New("distributor: unknown view")
	// ErrNotActive: the stream is not active here (standby, or not running).
	ErrNotActive = errors.New("distributor: stream not active")
	// ErrPostgresAuth: PostgreSQL refused the login (a wrong password, no pg_hba.conf
	// entry, a role that does not exist, may not log in or lacks REPLICATION for a wal
	// stream). Run stops with it at once, as with Kafka's authentication failures.
	ErrPostgresAuth = errors.New("distributor: PostgreSQL refused the login")
	// ErrStopped: WaitReady saw Run return before the streams were ready.
	ErrStopped = errors.New("distributor: stopped before ready")
)

// ViewError is a problem with one view's data or SQL. Column and Key are set when known.
type ViewError struct {
	View   string
	Column string
	Key    string
	Err    error
}

func (e *ViewError) Error() string {
	s := fmt.Sprintf("distributor: view %q", e.View)
	if e.Column != "" {
		s += fmt.Sprintf(" column %q", e.Column)
	}
	if e.Key != "" {
		s += fmt.Sprintf(" key %q", e.Key)
	}
	return s + ": " + e.Err.Error()
}

func (e *ViewError) Unwrap() []error { return []error{ErrView, e.Err} }

func isErr(err, target error) bool { return errors.Is(err, target) }
