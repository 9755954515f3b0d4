package cacheclient

import (
	"errors"
	"fmt"
)

var (
	// ErrConfig is wrapped by Config.Validate (and so New), Register, AddIndex, OnChange
	// and TLSFiles for bad arguments.
	ErrConfig = errors.New("cacheclient: invalid config")
	// ErrStarted is returned when a view, index or handler is registered after Start.
	ErrStarted = errors.New("cacheclient: client already started")
	// ErrClosed is returned by Start after Close, and by WaitReady when the client stopped
	// before it was ready.
	ErrClosed = errors.New("cacheclient: client closed")
	// ErrOrder reports an order anomaly at the receiver (a position not above the applied
	// one, a snapshot frame out of place, a key of another view). The client reconnects
	// from its last applied position.
	ErrOrder = errors.New("cacheclient: order anomaly")
	// ErrEpochMismatch reports a view whose count or hash differs from its epoch-end record.
	// The client reconnects without a resume position and replaces its state by a snapshot.
	ErrEpochMismatch = errors.New("cacheclient: epoch check failed")
	// ErrStateFile reports a StateDir file that cannot be trusted (corrupt, truncated,
	// another stream or format version). It is reported and replaced, never half-used.
	ErrStateFile = errors.New("cacheclient: unusable state file")
	// ErrStateAuth, an ErrStateFile, reports a state file that Config.StateKey does not
	// authenticate: its MAC does not verify (forged, or written with another key), or it
	// has a checksum and no MAC. The client logs it at Error level, calls Hooks.OnResync
	// ("state file not authenticated") and bootstraps from a snapshot.
	ErrStateAuth = fmt.Errorf("%w: not authenticated by the state key", ErrStateFile)
	// ErrStaleView is matched (errors.Is) by the *StaleViewError of WaitFor: the position
	// record that reached the position lists one of the client's views as stale.
	ErrStaleView = errors.New("cacheclient: view does not follow the source position")
	// ErrNoSourcePosition is returned by WaitFor when the stream's position records carry
	// no source position (views captured by polling): read-your-writes cannot be had.
	ErrNoSourcePosition = errors.New("cacheclient: the stream has no source position")
	// ErrInvalidLSN is wrapped by ParseLSN.
	ErrInvalidLSN = errors.New("cacheclient: invalid LSN")
	// ErrPanic is matched by the *PanicError of a Decoder, IndexFunc or change handler
	// that panicked: the client recovered it (see PanicError).
	ErrPanic = errors.New("cacheclient: panic recovered")
)

// StaleViewError details an ErrStaleView: the position record at Position lists View (and
// Views: every stale view of the client) as not following the source position. The
// distributor stopped the view on a bad row; it keeps its last rows until the row is fixed.
type StaleViewError struct {
	View     string
	Views    []string
	Position LSN
}

func (e *StaleViewError) Error() string {
	return fmt.Sprintf("cacheclient: view %q does not follow the source position %s (stale views: %v)", e.View, e.Position, e.Views)
}

func (e *StaleViewError) Unwrap() error { return ErrStaleView }

// EpochMismatchError details an ErrEpochMismatch.
type EpochMismatchError struct {
	View               string
	Epoch              int64
	WantRows, HaveRows int64
	WantHash, HaveHash uint64
	Position           int64 // the stream position of the epoch-end record
}

func (e *EpochMismatchError) Error() string {
	return fmt.Sprintf("cacheclient: view %q epoch %d at position %d: have %d rows hash %016x, epoch says %d rows hash %016x",
		e.View, e.Epoch, e.Position, e.HaveRows, e.HaveHash, e.WantRows, e.WantHash)
}

func (e *EpochMismatchError) Unwrap() error { return ErrEpochMismatch }

// HandlerError reports a change handler whose attempts were exhausted (passed to the error
// hook; the change is then skipped and later changes of the key proceed).
type HandlerError struct {
	View     string
	Key      string
	Position int64 // the change's stream position (Change.Position)
	Attempts int
	Err      error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("cacheclient: handler of view %q failed for key %q (position %d) after %d attempts: %v",
		e.View, e.Key, e.Position, e.Attempts, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }
