package cacheclient

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrConfig is wrapped by Config.Validate (and so New), Register, AddIndex, OnChange
	// and TLSFiles for bad arguments.
	ErrConfig = errors.New("cacheclient: invalid config")
	// ErrStarted is returned when a view, index or handler is registered after Start.
	ErrStarted = errors.New("cacheclient: client already started")
	// ErrClosed is returned by Start after Close, and by WaitReady and WaitFor once the
	// client is closed.
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

// The kinds of a *SubscribeError: why a player refused a subscription, or why it could not
// be reached. Match them with errors.Is on the error of WaitReady, WaitFor, Run and Err,
// and on the err of Hooks.OnDisconnect.
//
// A refusal that cannot heal while the client keeps its config (ErrUnknownView,
// ErrPermissionDenied, ErrBadHello, and ErrUnknownStream once every address refused it)
// stops the client: it stops retrying, WaitReady and WaitFor return the refusal at once
// (errors.Is ErrStopped too), Stats says Stopped, and it stays stopped until Close. The
// others are retried with backoff, and WaitReady and WaitFor name the last of them when
// their ctx ends (a *WaitError).
var (
	// ErrUnknownView: the player does not carry a view the client registered: a misspelt
	// name, or a view that is neither published yet nor declared in the player's stream
	// config (player.StreamConfig.Views, which exists so that a service may subscribe to
	// a view before its first record). The client stops.
	ErrUnknownView = errors.New("cacheclient: unknown view")
	// ErrUnknownStream: a player does not serve Config.Stream. A stream that one player
	// does not serve yet may be served by another of the list, or by the same one after
	// a restart during a rollout (players are rolled out before their clients): the
	// client stops only once every address of Config.Addresses refused it in its latest
	// attempt, with nothing received in between; until then it tries the next address.
	// A target (dns:///…) counts as one address, whichever player it resolved to.
	ErrUnknownStream = errors.New("cacheclient: unknown stream")
	// ErrPermissionDenied: the client's principal (its token or certificate) is not granted
	// the stream or one of its views; the message names which. The grant is in the
	// player's config (docs/security.md). The client stops.
	ErrPermissionDenied = errors.New("cacheclient: permission denied")
	// ErrBadHello: the player found the subscription request itself invalid (more views
	// than its max_hello_views, a service name or instance id too long). The client stops.
	ErrBadHello = errors.New("cacheclient: invalid subscription request")
	// ErrUnauthenticated: the player found no valid credentials (a missing, unknown or
	// revoked token, no verified client certificate). Retried: a token source and a
	// certificate file are read again at each connection, so a rotation heals it.
	ErrUnauthenticated = errors.New("cacheclient: unauthenticated")
	// ErrIncompatible: the player cannot serve this client as it is configured: the
	// client speaks a newer protocol version than the player (upgrade the players first),
	// or its receive limit (Config.MaxReceiveBytes) is below the player's largest record
	// frame. Retried: upgrading or reconfiguring the player heals it.
	ErrIncompatible = errors.New("cacheclient: client and player are incompatible")
	// ErrUnavailable: the player cannot be reached (nothing listens there, the connection
	// failed or was dropped), or it answered that it cannot serve now (shutting down,
	// Kafka unreachable). Retried, on the next address.
	ErrUnavailable = errors.New("cacheclient: player unavailable")

	// ErrStopped is matched by the error of a client that stopped on a refusal that cannot
	// heal (the refusal is wrapped too): Close it; a service that cannot run without the
	// view should exit with that error rather than serve an empty cache (a restart with
	// the same config is refused again), and one that can should report it (Stats,
	// cachestatus) and start a new client once its config is fixed.
	ErrStopped = errors.New("cacheclient: client stopped")
)

// SubscribeError is why a subscription to a player ended: a refusal of the player (a gRPC
// status of schemas/proto/README.md, "Errors → gRPC status codes") or a failed
// connection. It matches (errors.Is) its Kind, one of ErrUnknownView, ErrUnknownStream,
// ErrPermissionDenied, ErrBadHello, ErrUnauthenticated, ErrIncompatible and
// ErrUnavailable when it is one of those, and the gRPC status error it comes from
// (status.Code works on it).
type SubscribeError struct {
	Addr    string     // the player's address (a target's with the player it resolved to)
	Code    codes.Code // the gRPC status code
	Message string     // the player's message (it names the view, stream or grant)
	Kind    error      // nil when the code is none of the kinds above
	// Permanent: retrying with the same config cannot succeed (see ErrStopped).
	// ErrUnknownStream is permanent only once every address refused it; this one is
	// marked so.
	Permanent bool
	err       error // the gRPC status error
}

func (e *SubscribeError) Error() string {
	return fmt.Sprintf("cacheclient: player %s: %s: %s", e.Addr, e.Code, e.Message)
}

// Unwrap returns the kind and the gRPC status error.
func (e *SubscribeError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// WaitError is the error of WaitReady and WaitFor when their ctx ends first. It matches
// ctx's error (errors.Is context.DeadlineExceeded or context.Canceled) and its Cause.
type WaitError struct {
	Op  string // "WaitReady" or "WaitFor"
	Err error  // ctx's error
	// Cause is why the client was not there yet: the last refusal or connection error (a
	// *SubscribeError, or an error of the client's own checks such as ErrOrder) since it
	// last received a frame from a player; nil when its current stream was receiving
	// (the wait was only too short).
	Cause error
	// Connected tells whether the client had a stream open when ctx ended.
	Connected bool
}

func (e *WaitError) Error() string {
	switch {
	case e.Cause != nil:
		return fmt.Sprintf("cacheclient: %s: %v; the last error: %v", e.Op, e.Err, e.Cause)
	case e.Connected:
		return fmt.Sprintf("cacheclient: %s: %v while receiving from a player", e.Op, e.Err)
	}
	return fmt.Sprintf("cacheclient: %s: %v before any player answered", e.Op, e.Err)
}

// Unwrap returns ctx's error and the cause.
func (e *WaitError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// subscribeError classifies err, the end of a subscription to addr: a gRPC status
// becomes a *SubscribeError; any other error (the client's own checks) is returned as
// it is. The player's sentinels share codes (NotFound: an unknown stream or view;
// InvalidArgument: a bad Hello or a bad Ack), told apart by the message, which starts with
// the sentinel's text (player.StatusTable); the e2e tests hold the two to each other.
func subscribeError(addr string, err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	e := &SubscribeError{Addr: addr, Code: st.Code(), Message: st.Message(), err: err}
	switch e.Code {
	case codes.NotFound:
		if strings.Contains(e.Message, "unknown view") {
			e.Kind, e.Permanent = ErrUnknownView, true
		} else {
			e.Kind = ErrUnknownStream // permanent once every address refused it (connect)
		}
	case codes.PermissionDenied:
		e.Kind, e.Permanent = ErrPermissionDenied, true
	case codes.InvalidArgument:
		if strings.Contains(e.Message, "bad hello") {
			e.Kind, e.Permanent = ErrBadHello, true
		}
	case codes.Unauthenticated:
		e.Kind = ErrUnauthenticated
	case codes.FailedPrecondition:
		e.Kind = ErrIncompatible
	case codes.Unavailable:
		e.Kind = ErrUnavailable
	}
	return e
}
