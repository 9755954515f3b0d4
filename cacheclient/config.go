package cacheclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// Defaults of Config.
const (
	DefaultPersistInterval = 30 * time.Second
	DefaultBackoffMin      = 100 * time.Millisecond
	DefaultBackoffMax      = 5 * time.Second
	DefaultReadyIdle       = time.Second
	DefaultRecvWindow      = 8 << 20
	DefaultMaxBatchEntries = 4096
	// DefaultMaxReceiveBytes is gRPC's own default receive limit, which a player's default
	// max_record_bytes fits.
	DefaultMaxReceiveBytes = 4 << 20
)

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	// Addresses of the players, at least one: host:port, or a gRPC target URI such as
	// dns:///player-headless:7070 (a Kubernetes headless Service) whose resolver gives
	// several players. The client connects to one entry at a time and fails over to the
	// next on error, with jittered exponential backoff. Within a target URI it fails over
	// across the resolved addresses: each new stream goes to the next ready one (gRPC's
	// round_robin), and a change of the resolver's answer is followed without a restart.
	Addresses []string
	// Stream is the stream (Kafka topic) to subscribe to. Required.
	Stream string
	// Service names the service this client belongs to, the same for all its replicas:
	// the player labels its metrics with it. Required.
	Service string
	// InstanceID names this process among the player's clients: only a reconnect with the
	// same instance id (and the same credentials) replaces its connection at the player,
	// so two replicas of a service must not share one. Default: DefaultInstanceID() at New
	// (hostname, pid and a random suffix).
	InstanceID string
	// TLS, when set, secures the connections; nil means plaintext. For mutual TLS it
	// carries the client certificate (Certificates or GetClientCertificate; TLSFiles
	// builds one from PEM files).
	TLS *tls.Config
	// Token, when set, is called for every subscription and sent as its bearer token
	// (authorization: Bearer <token>); StaticToken and TokenFile make one. It needs TLS:
	// a token is never sent in plaintext.
	Token TokenSource
	// StateDir, when set, is where the client persists its views and stream position, so
	// that a restart resumes from the saved position instead of a full snapshot. The raw values are
	// then kept in memory beside the decoded objects. One client per directory: Start
	// removes the temp files (StateFileName + ".tmp*") that a write cut by a crash left.
	StateDir string
	// StateKey, when set (at least MinStateKeyLen bytes; needs StateDir), authenticates
	// the state file: it is written with an HMAC-SHA256 under the key instead of a
	// checksum, and only a file whose MAC verifies is loaded. Without it anyone who can
	// write StateDir can make a file of forged rows that the client loads and serves; with
	// it a file the key does not authenticate (forged, of another key, or written without
	// one) is refused with an Error log and Hooks.OnResync ("state file not
	// authenticated"), and the client bootstraps from a snapshot. Changing the key costs
	// one such bootstrap. StateKeyFile reads a key from a file (a mounted secret). The
	// key never appears in logs or errors.
	StateKey []byte
	// PersistInterval between state files (with StateDir), default 30s. Close writes one too.
	PersistInterval time.Duration
	// MaxBatchEntries bounds the entries of a batch (default DefaultMaxBatchEntries). The
	// client asks the player for it in Hello (the lower of it and the player's own bound
	// applies) and refuses a larger batch as malformed: a frame's memory is bounded by it,
	// never by what the frame claims.
	MaxBatchEntries uint32
	// MaxBatchBytes is a hint to the player (0 = its default).
	MaxBatchBytes uint32
	// MaxReceiveBytes is the largest message the client receives (the subscription's
	// gRPC receive limit; default DefaultMaxReceiveBytes). It is told to the player, which
	// cuts batches to fit it and refuses the subscription (FailedPrecondition, retried
	// with a logged error) when its max_record_bytes does not fit: raise it with the
	// players' max_record_bytes when the topic takes larger records.
	MaxReceiveBytes uint32
	// BackoffMin and BackoffMax bound the reconnect backoff (defaults 100ms and 5s).
	BackoffMin, BackoffMax time.Duration
	// ReadyIdle: after resuming from a position, the initial state counts as caught up
	// once the applied position reaches the player's head_index at subscribe (that of the
	// first frame), or at a Progress frame; only with a player that sends no head_index
	// (older ones), also when no frame arrived for ReadyIdle (default 1s).
	ReadyIdle time.Duration
	// RecvWindow fixes the HTTP/2 flow-control window of the subscription (bytes the
	// player may send ahead of what the client has read; the connection's window is twice
	// it, so up to 3× it may be buffered in the client): 64 KiB to 1 GiB, 0 for
	// DefaultRecvWindow (8 MiB). A large window from the first byte lets a snapshot stream
	// at full speed at once, instead of at the pace of gRPC's estimator growing the window;
	// its cost is the memory above.
	RecvWindow int32
	// DynamicRecvWindow leaves the flow-control windows to gRPC instead (64 KiB, grown by
	// its bandwidth estimator); RecvWindow must then be 0.
	DynamicRecvWindow bool
	// ProgressInterval: while a snapshot is received (a bootstrap, a resync), every
	// ProgressInterval the client logs its rows, rows/s and elapsed time and calls
	// Hooks.OnSnapshotProgress (default DefaultProgressInterval).
	ProgressInterval time.Duration
	// DisableProgress turns those progress reports off; ProgressInterval must then be 0.
	DisableProgress bool
}

// DefaultProgressInterval is Config.ProgressInterval's default.
const DefaultProgressInterval = 10 * time.Second

// Validate fills the defaults (documented on each field) and checks the config. Errors wrap
// ErrConfig and name the field (Addresses[1], PersistInterval); every problem is reported at
// once. Zero takes the default; a negative duration or size is refused. New calls it on its
// copy; calling it again changes nothing.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Addresses) == 0 {
		bad("Addresses: at least one player address is required")
	}
	for i, a := range c.Addresses {
		if isTarget(a) {
			if u, err := url.Parse(a); err != nil || u.Host == "" && strings.Trim(u.Path, "/") == "" {
				bad("Addresses[%d]: target %q: want scheme://[authority]/endpoint, e.g. dns:///players:7070", i, a)
			}
		} else if _, _, err := net.SplitHostPort(a); err != nil {
			bad("Addresses[%d]: %q: %v", i, a, err)
		}
	}
	if c.Stream == "" {
		bad("Stream: required")
	}
	if c.Service == "" {
		bad("Service: required")
	}
	if len(c.Service) > maxIdentityLen {
		bad("Service: at most %d bytes", maxIdentityLen)
	}
	if len(c.InstanceID) > maxIdentityLen {
		bad("InstanceID: at most %d bytes", maxIdentityLen)
	}
	switch {
	case c.StateKey != nil && c.StateDir == "":
		bad("StateKey: needs StateDir (it authenticates the state file)")
	case c.StateKey != nil && len(c.StateKey) < MinStateKeyLen:
		bad("StateKey: %d bytes, at least %d", len(c.StateKey), MinStateKeyLen)
	}
	if c.Token != nil && c.TLS == nil {
		bad("Token: needs TLS (a token is never sent in plaintext)")
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"PersistInterval", c.PersistInterval}, {"BackoffMin", c.BackoffMin}, {"BackoffMax", c.BackoffMax},
		{"ReadyIdle", c.ReadyIdle}, {"ProgressInterval", c.ProgressInterval},
	} {
		if f.v < 0 {
			bad("%s: %v is negative (0 takes the default)", f.name, f.v)
		}
	}
	switch {
	case c.RecvWindow < 0:
		bad("RecvWindow: %d is negative (0 takes the default; DynamicRecvWindow leaves the window to gRPC)", c.RecvWindow)
	case c.RecvWindow != 0 && c.DynamicRecvWindow:
		bad("RecvWindow: must be 0 with DynamicRecvWindow")
	case c.RecvWindow != 0 && c.RecvWindow < 64<<10 || c.RecvWindow > 1<<30:
		bad("RecvWindow: %d is outside 64 KiB..1 GiB (0 takes the default)", c.RecvWindow)
	}
	if c.ProgressInterval != 0 && c.DisableProgress {
		bad("ProgressInterval: must be 0 with DisableProgress")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if c.PersistInterval == 0 {
		c.PersistInterval = DefaultPersistInterval
	}
	if c.ProgressInterval == 0 && !c.DisableProgress {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.ReadyIdle == 0 {
		c.ReadyIdle = DefaultReadyIdle
	}
	if c.RecvWindow == 0 && !c.DynamicRecvWindow {
		c.RecvWindow = DefaultRecvWindow
	}
	if c.MaxBatchEntries == 0 {
		c.MaxBatchEntries = DefaultMaxBatchEntries
	}
	if c.MaxReceiveBytes == 0 {
		c.MaxReceiveBytes = DefaultMaxReceiveBytes
	}
	if c.InstanceID == "" {
		c.InstanceID = DefaultInstanceID()
	}
	return nil
}

// isTarget reports whether an Addresses entry is a gRPC target URI (dns:///host:port)
// rather than one player's host:port.
func isTarget(a string) bool { return strings.Contains(a, "://") }

// maxIdentityLen is the player's bound on the service name and the instance id.
const maxIdentityLen = 256

// Option customises a Client.
type Option func(*options)

type options struct {
	logger *slog.Logger
	hooks  Hooks
	dial   []grpc.DialOption
	now    func() time.Time
	many   *Many // WithMany: subscribe as channels of its streams
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithHooks sets metric hooks (default: none).
func WithHooks(h Hooks) Option { return func(o *options) { o.hooks = h } }

// WithDialOptions adds gRPC dial options (interceptors, custom dialers, …).
func WithDialOptions(d ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, d...) }
}

// Hooks observe the client. Every hook is optional and runs on the connection goroutine
// (OnHandlerError on a handler goroutine); hooks must be fast and must not call back into
// the client except for its read-only methods (Stats, views).
type Hooks struct {
	// OnBatchApplied: n entries were applied and published at position (a batch, or the
	// batches of a source transaction published at its end); lag is the
	// time from the source time of its last row to its publication.
	OnBatchApplied func(n int, position int64, lag time.Duration)
	// OnConnect: a stream to addr was established (resumed: with a resume position). addr
	// is the Addresses entry; for a target URI, followed by the player it resolved to:
	// "dns:///players:7070 (10.0.0.7:7070)".
	OnConnect func(addr string, resumed bool)
	// OnDisconnect: the stream to addr ended with err.
	OnDisconnect func(addr string, err error)
	// OnResync: the player sent ResyncRequired, or the client dropped its state (reason).
	OnResync func(reason string)
	// OnSnapshot: a snapshot of views at position was published (at its end, or with the
	// source transaction open at its position).
	OnSnapshot func(position int64, rows int)
	// OnSnapshotProgress: a snapshot at position is being received: rows so far, for
	// elapsed since it began (every Config.ProgressInterval, from the connection's
	// goroutine: return quickly).
	OnSnapshotProgress func(position int64, rows int64, elapsed time.Duration)
	// OnEpochCheck: an epoch-end check of view passed (err nil) or failed.
	OnEpochCheck func(view string, epoch int64, err error)
	// OnDecodeError: the decoder refused a row; the key is absent from the view until a
	// later version decodes (also logged at Error level and counted in ViewStats).
	OnDecodeError func(view, key string, err error)
	// OnHandlerError: a change handler exhausted its attempts (*HandlerError).
	OnHandlerError func(err error)
	// OnPersist: a state file was written (err nil) or failed.
	OnPersist func(bytes int64, d time.Duration, err error)
}
