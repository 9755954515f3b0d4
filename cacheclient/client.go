package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"

	"github.com/statecast/statecast/schemas/record"
)

// viewCore is the type-erased side of a View that the client drives. Every method except
// stats and capture runs on the connection goroutine.
type viewCore interface {
	viewName() string
	keyPrefix() []byte // esc(name) + "|"
	begin()
	applyRow(r row)
	commit(pos int64) any // returns the published version (a *viewState[T])
	rollback()
	beginReplace()
	reserveReplace(rows int)
	replacing() bool
	stageRow(r row)
	loadRows(body []byte, offs []int, rows int)
	endReplace(pos int64)
	abortReplace()
	epochState() (rows int64, hash uint64)
	flushChanges(ctx context.Context) error
	handlerList() []handlerCore
	capture(cut *Cut) viewCapture // its version in cut (immutable), for persistence
	stats() ViewStats
	selection() *statecastv1.Selection // nil: the whole view; any goroutine
	Selection() Selection
}

// Client keeps typed views of a stream in memory. See the package documentation.
type Client struct {
	cfg  Config
	opts options
	log  *slog.Logger

	mu      sync.Mutex // guards started, closed, views registration
	started bool
	closed  bool
	views   []viewCore
	byName  map[string]viewCore
	keepRaw bool
	codec   frameCodec // set by Start (interns the views' names)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	ready     chan struct{}
	readyOnce sync.Once
	stopped   chan struct{} // closed when the connection goroutine returned
	runErr    error         // what it returned (read after stopped): nil, or a *stoppedError
	// cause is why the client is not receiving: what ended its last stream, cleared by
	// the first frame of the next one (WaitError.Cause). nil: receiving, or nothing yet.
	cause atomic.Pointer[errorBox]

	// applyMu is held by the connection goroutine while it applies a batch or snapshot end,
	// and by the persister while it captures the views: a capture is a consistent cut.
	applyMu sync.Mutex
	applied atomic.Int64 // the stream position every view reflects (-1: none)
	// topic is the Kafka topic ID of the topic applied is an offset of ("": unknown): an
	// index means something only with it. Written with applied under applyMu.
	topic string
	load  *stateLoad // the state file's load at Start (nil without StateDir)
	// cut is the last publication of every view (Read, WaitFor); published under applyMu.
	cut atomic.Pointer[Cut]
	// wsrc is the source state of the working versions (the last position entry applied,
	// published or staged). Owned by the connection goroutine (by the load goroutine
	// before it handles any frame).
	wsrc    sourceState
	closing chan struct{} // closed by Close: releases WaitFor, ends Done
	// reselected: a view's selection changed (Reselect); the next stream subscribes without
	// a resume index. endStream ends the current stream (nil between streams).
	reselected atomic.Bool
	endStream  atomic.Pointer[func()]

	// Every view's handlers (fixed at Start) and the publications handed over to them
	// that the state file may not pass yet (handled.go).
	handlers []handlerCore
	marksMu  sync.Mutex
	marks    []handledMark

	st counters
}

type counters struct {
	entries, batches, resyncs, epochOK, epochBad, decodeErrs, reconnects, snapshots atomic.Int64
	handlerErrs, persists, persistErrs, panics                                      atomic.Int64
	lastSourceTime                                                                  atomic.Int64 // unix nanos of the last applied row
	lastLagNanos                                                                    atomic.Int64
	snapshotTarget                                                                  atomic.Int64
	snapRows                                                                        atomic.Int64 // rows of the snapshot being received
	snapStartNanos                                                                  atomic.Int64 // when it began (unix nanos); 0: none
	head                                                                            atomic.Int64 // the player's head_index in the last frame
	connected                                                                       atomic.Bool
	lastErr                                                                         atomic.Pointer[errorAt] // why the last stream ended
	created                                                                         time.Time               // New: Info.Created
}

// errorAt is an error and when it happened (Stats.LastError).
type errorAt struct {
	err string
	at  time.Time
}

// New validates a copy of cfg (Config.Validate) and returns a client that is not running
// yet: register views, indexes and handlers, then call Start (or Run).
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, byName: map[string]viewCore{}, ready: make(chan struct{}), stopped: make(chan struct{}),
		closing: make(chan struct{})}
	c.st.created = time.Now()
	for _, o := range opts {
		o(&c.opts)
	}
	if c.opts.logger == nil {
		c.opts.logger = slog.New(slog.DiscardHandler)
	}
	if c.opts.now == nil {
		c.opts.now = time.Now
	}
	c.log = c.opts.logger.With("component", "cacheclient", "stream", cfg.Stream, "service", cfg.Service, "instance", cfg.InstanceID)
	c.keepRaw = cfg.StateDir != ""
	c.applied.Store(-1)
	c.cut.Store(&Cut{c: c, position: -1, next: make(chan struct{})}) // no view yet: see View.In
	return c, nil
}

// Register adds a typed view named name to the client, decoded by decode. It must be called
// before Start. Options select part of the view (WithFilter, WithShard; Selection): the
// view then holds only those rows.
func Register[T any](c *Client, name string, decode Decoder[T], opts ...ViewOption) (*View[T], error) {
	if !record.ValidViewName(name) {
		return nil, fmt.Errorf("%w: view name %q", ErrConfig, name)
	}
	var sel Selection
	for _, o := range opts {
		o(&sel)
	}
	if err := sel.validate(name); err != nil {
		return nil, err
	}
	if decode == nil {
		return nil, fmt.Errorf("%w: view %q needs a decoder", ErrConfig, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return nil, ErrStarted
	}
	if _, dup := c.byName[name]; dup {
		return nil, fmt.Errorf("%w: view %q registered twice", ErrConfig, name)
	}
	v := newView(c, name, decode)
	if !sel.IsZero() {
		v.sel.Store(&sel)
	}
	v.slot = len(c.views)
	c.views = append(c.views, v)
	c.byName[name] = v
	return v, nil
}

func (c *Client) checkNotStarted() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return ErrStarted
	}
	return nil
}

// Start starts the client's goroutines and returns at once; see WaitReady and Close.
func (c *Client) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.started {
		return ErrStarted
	}
	if len(c.views) == 0 {
		return fmt.Errorf("%w: no views registered", ErrConfig)
	}
	c.started = true
	c.codec = newFrameCodec(c.views, int(c.cfg.MaxBatchEntries))
	c.applyMu.Lock()
	c.publish(-1) // the first Cut with every view (empty)
	c.applyMu.Unlock()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, v := range c.views {
		for _, h := range v.handlerList() {
			h.start(c.ctx)
			c.handlers = append(c.handlers, h)
		}
	}
	c.markHandedOver() // the first Cut: nothing to hand over
	if c.cfg.StateDir != "" {
		c.removeStaleTemps()
		c.load = newStateLoad()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.loadState(c.load)
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(c.stopped)
		c.runErr = c.connect(c.ctx)
	}()
	if c.cfg.StateDir != "" {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.persistLoop(c.ctx)
		}()
	}
	return nil
}

// Run starts the client and blocks until ctx ends or the client stops on a refusal that
// cannot heal (see ErrStopped), then closes it. It returns that refusal, or Close's error.
func (c *Client) Run(ctx context.Context) error {
	if err := c.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-c.stopped:
	}
	return errors.Join(c.Err(), c.Close())
}

// Err returns the error the client stopped on: a refusal of a player that cannot heal
// while the client keeps its config (errors.Is ErrStopped, and its kind: ErrUnknownView,
// ErrUnknownStream, ErrPermissionDenied or ErrBadHello). It is nil while the client runs
// or retries, and after Close when it had not stopped. A stopped client serves the views
// as they were (empty when it was never ready) and stays stopped until Close.
func (c *Client) Err() error {
	select {
	case <-c.stopped:
		return c.runErr
	default:
		return nil
	}
}

// waitErr is the error of a wait (WaitReady, WaitFor) whose ctx ended.
func (c *Client) waitErr(op string, ctx context.Context) error {
	e := &WaitError{Op: op, Err: ctx.Err(), Connected: c.st.connected.Load()}
	if b := c.cause.Load(); b != nil {
		e.Cause = b.err
	}
	return e
}

// stoppedErr is the error of a wait when the connection goroutine returned.
func (c *Client) stoppedErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close stops the connection, drains nothing further, waits for the handlers in flight,
// writes a last state file (with StateDir) and closes the connections. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	started := c.started
	close(c.closing)
	c.mu.Unlock()
	if !started {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	var err error
	for _, v := range c.views {
		for _, h := range v.handlerList() {
			h.stop()
		}
	}
	if c.cfg.StateDir != "" {
		err = c.persist()
	}
	return err
}

// WaitReady blocks until the initial state of every view is complete (a snapshot applied,
// or caught up after resuming from a position) and, for handlers registered with
// WithInitialPass, their changes up to that point have been handled.
//
// When ctx ends first it returns a *WaitError that matches ctx's error and names the last
// refusal or connection error since the client last received a frame (errors.Is
// ErrUnavailable, ErrUnauthenticated, …): a client that cannot reach a player says which
// and why. When the client stopped on a refusal that cannot heal (a misspelt view or
// stream, a missing grant) it returns that at once (errors.Is ErrStopped and the
// refusal's kind, see Err); ErrClosed once the client is closed.
func (c *Client) WaitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		select {
		case <-c.ready:
			return nil
		default:
		}
		return c.waitErr("WaitReady", ctx)
	case <-c.stopped:
		select {
		case <-c.ready:
			return nil
		default:
		}
		return c.stoppedErr()
	}
}

// Ready reports whether WaitReady would return nil at once.
func (c *Client) Ready() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// markReady is called on the connection goroutine when the initial state is complete.
func (c *Client) markReady() {
	select {
	case <-c.ready:
		return
	default:
	}
	var waits []func(context.Context) error
	for _, v := range c.views {
		for _, h := range v.handlerList() {
			if w := h.initialWait(); w != nil {
				waits = append(waits, w)
			}
		}
	}
	if len(waits) == 0 {
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for _, w := range waits {
			if w(c.ctx) != nil {
				return
			}
		}
		c.readyOnce.Do(func() { close(c.ready) })
	}()
}

// Position returns the stream position (the record's index in the stream) the client has
// applied: every view reflects every record up to it (-1 before the first batch). A view
// is published before the client's position moves, so View.Position may briefly be one
// batch ahead of it.
func (c *Client) Position() int64 { return c.applied.Load() }

// decodeError reports a row the decoder refused. Loudly: the row's key is absent from the
// view until a later version of it decodes, which a reader cannot tell from a deleted row.
func (c *Client) decodeError(view, key string, index int64, err error) {
	c.st.decodeErrs.Add(1)
	c.log.Error("decode failed: the row is kept out of the view until a later version of it decodes",
		"view", view, "key", key, "index", index, "err", err)
	if h := c.opts.hooks.OnDecodeError; h != nil {
		h(view, key, err)
	}
}

// dialOptions: the flow-control windows, then the caller's options (which win).
func (c *Client) dialOptions() []grpc.DialOption {
	var o []grpc.DialOption
	if w := c.cfg.RecvWindow; w > 0 {
		o = append(o, grpc.WithInitialWindowSize(w), grpc.WithInitialConnWindowSize(2*w), grpc.WithReadBufferSize(256<<10))
	}
	return append(o, c.opts.dial...)
}
