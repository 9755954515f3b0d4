package cacheclient

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/statecast/statecast/internal/backoff"
	"github.com/statecast/statecast/internal/grpctls"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// KeepaliveTime and KeepaliveTimeout: a connection idle for KeepaliveTime is pinged, and
// dropped (then failed over) when the ping gets no answer within KeepaliveTimeout. The
// player accepts pings at most every 10s by default.
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// connect is the connection goroutine: it keeps one Subscribe stream open to one of the
// players, failing over to the next address with jittered exponential backoff.
func (c *Client) connect(ctx context.Context) error {
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		creds = grpctls.ClientCredentials(c.cfg.TLS)
	}
	conns := make([]*grpc.ClientConn, len(c.cfg.Addresses))
	releases := make([]func(), len(conns)) // WithMany: give back the shared connections
	defer func() {
		for n, cc := range conns {
			switch {
			case releases[n] != nil:
				releases[n]()
			case cc != nil:
				cc.Close()
			}
		}
	}()
	wait := backoff.New(backoff.Policy{Min: c.cfg.BackoffMin, Max: c.cfg.BackoffMax})
	// refusedStream[n]: the latest attempt at address n was refused with ErrUnknownStream.
	refusedStream := make([]bool, len(conns))
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return nil
		}
		n := i % len(conns)
		addr := c.cfg.Addresses[n]
		var progressed bool
		var err error
		if conns[n] == nil {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout})}
			if isTarget(addr) {
				opts = append(opts, grpc.WithDefaultServiceConfig(roundRobin))
			}
			if c.cfg.Token != nil {
				opts = append(opts, grpc.WithPerRPCCredentials(tokenCredentials{c.cfg.Token}))
			}
			opts = append(opts, c.dialOptions()...)
			if c.opts.many != nil {
				conns[n], releases[n], err = c.opts.many.conn(addr, opts)
			} else {
				conns[n], err = grpc.NewClient(addr, opts...)
			}
		}
		if err == nil {
			progressed, err = c.session(ctx, conns[n], addr)
		}
		c.st.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if c.reselected.Load() {
			// Our own end of the stream (Reselect): subscribe again at once, same player.
			c.log.Info("selection changed; subscribing again for a snapshot", "addr", addr)
			i--
			continue
		}
		c.st.reconnects.Add(1)
		if err == nil {
			err = errors.New("the subscription ended without an error") // never expected: keep the cause non-nil
		}
		c.st.lastErr.Store(&errorAt{err: err.Error(), at: time.Now()})
		c.cause.Store(&errorBox{err})
		var se *SubscribeError
		errors.As(err, &se)
		refusedStream[n] = se != nil && se.Kind == ErrUnknownStream
		if se != nil && se.Kind == ErrUnknownStream && !slices.Contains(refusedStream, false) {
			se.Permanent = true // every address refused it: see ErrUnknownStream
		}
		if h := c.opts.hooks.OnDisconnect; h != nil {
			h(addr, err)
		}
		if se != nil && se.Permanent {
			// Retrying with this config cannot succeed: say so at once (WaitReady, Stats)
			// rather than hang until the caller's timeout with the reason only in the log.
			c.log.Error("the player refused the subscription; the client stops (it is stopped until Close)",
				"addr", addr, "err", err)
			return &stoppedError{se}
		}
		if progressed {
			wait.Reset()
		}
		d := wait.Next()
		if se != nil && se.Kind != nil && se.Kind != ErrUnavailable {
			// A refusal that a rotation of the credentials, another player of the list or
			// an upgrade of the player may heal: loud, and retried.
			c.log.Error("the player refused the subscription; retrying", "addr", addr, "err", err, "in", d)
		} else {
			c.log.Warn("stream ended; reconnecting", "addr", addr, "err", err, "in", d)
		}
		if !backoff.Sleep(ctx, d) {
			return nil
		}
		if !errors.Is(err, ErrOrder) && !errors.Is(err, ErrEpochMismatch) {
			continue // transport trouble: try the next player
		}
		i-- // our own resubscribe: stay on the same player
	}
}

// roundRobin is the service config of a target URI's connection. Its resolver may give
// several players: round_robin keeps a connection to each and picks a ready one for every
// new stream, in turn, so that a reconnect after an error goes to the next player, a
// player that is down is skipped, and one that left the resolver's answer gets no new
// stream. (pick_first would stay on the first player that accepts connections, even one
// whose streams keep failing.)
const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// session runs one Subscribe stream until it fails. progressed tells whether anything was
// applied (the backoff is then reset).
func (c *Client) session(ctx context.Context, cc *grpc.ClientConn, addr string) (progressed bool, err error) {
	// A gRPC status (a refusal, a broken connection) names the player it came from.
	defer func() { err = subscribeError(addr, err) }()
	sctx, cancel := context.WithCancel(ctx)
	var idle sync.WaitGroup
	defer func() { cancel(); idle.Wait() }()
	var stream grpc.BidiStreamingClient[statecastv1.SubscribeRequest, frame]
	if c.opts.many != nil {
		// A channel of the shared SubscribeMany stream (Many).
		if stream, err = c.opts.many.open(sctx, addr, &c.codec, int(c.cfg.MaxReceiveBytes)); err != nil {
			return false, err
		}
	} else {
		// The generated Subscribe, but responses decoded by frameCodec (see frame.go).
		cs, err := cc.NewStream(sctx, &statecastv1.Player_ServiceDesc.Streams[0], statecastv1.Player_Subscribe_FullMethodName,
			grpc.ForceCodecV2(c.codec), grpc.MaxCallRecvMsgSize(int(c.cfg.MaxReceiveBytes)))
		if err != nil {
			return false, err
		}
		if p, ok := peer.FromContext(cs.Context()); ok && p.Addr != nil && isTarget(addr) {
			addr += " (" + p.Addr.String() + ")" // the player the target resolved to
		}
		stream = &grpc.GenericClientStream[statecastv1.SubscribeRequest, frame]{ClientStream: cs}
	}
	hello := &statecastv1.Hello{
		ClientId: c.cfg.InstanceID, Service: c.cfg.Service, Stream: c.cfg.Stream,
		MaxBatchEntries: c.cfg.MaxBatchEntries, MaxBatchBytes: c.cfg.MaxBatchBytes,
		MaxMessageBytes: c.cfg.MaxReceiveBytes,
	}
	for _, v := range c.views {
		hello.Views = append(hello.Views, v.viewName())
	}
	c.helloSelections(hello)
	if c.reselected.Swap(false) {
		// A selection changed: what the views hold is not the new selection's state.
		c.applied.Store(-1)
		c.dropMarks()
	}
	end := func() { cancel() }
	c.endStream.Store(&end)
	defer c.endStream.Store(nil)
	resumed := false
	idx, topic, err := c.resumeIndex(sctx)
	if err != nil {
		return false, err
	}
	if idx >= 0 {
		hello.ResumeIndex = &idx
		hello.TopicId = []byte(topic)
		resumed = true
	}
	if err := stream.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return false, err
	}
	c.st.connected.Store(true)
	c.log.Info("subscribed", "addr", addr, "resume_index", hello.GetResumeIndex(), "resumed", resumed)
	if h := c.opts.hooks.OnConnect; h != nil {
		h(addr, resumed)
	}
	r := &receiver{c: c, stream: stream, resumed: resumed, subscribed: time.Now(), staged: -1, readyAt: -1}
	if resumed {
		r.topic = topic
	}
	defer r.abort()

	// Readiness after a resume: the applied position reaches the head_index of the first
	// frame (the player's main position at subscribe), or a Progress frame (sent once the
	// player has caught the target up). Only a player that sends no head_index leaves the
	// client to ReadyIdle without frames: a slow recovery (Kafka, nothing sent for a while)
	// must not look caught up. The idle time counts from the Hello, also while the state
	// file is still loading (see stateLoad), but readiness waits for the load and for the
	// frame being handled.
	frames := make(chan struct{}, 1)
	var pending atomic.Bool // a received frame not handled yet
	if resumed && !c.Ready() {
		idle.Add(1)
		go func() {
			defer idle.Done()
			t := time.NewTimer(c.cfg.ReadyIdle)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-frames:
					t.Reset(c.cfg.ReadyIdle)
				case <-t.C:
					if r.headKnown.Load() {
						return // the head decides (receiver.readyAfter)
					}
					if c.waitLoaded(sctx) != nil {
						return
					}
					select {
					case <-frames:
						t.Reset(c.cfg.ReadyIdle)
						continue
					default:
					}
					if pending.Load() {
						t.Reset(c.cfg.ReadyIdle)
						continue
					}
					r.idleReady()
					return
				}
			}
		}()
	}
	loaded := false
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("player closed the stream")
			}
			return r.progressed, err
		}
		if first {
			c.cause.Store(nil) // a player serves: what ended the last stream is history (Stats.LastError)
		}
		pending.Store(true)
		select {
		case frames <- struct{}{}:
		default:
		}
		if !loaded {
			if err := c.waitLoaded(sctx); err != nil {
				return r.progressed, err
			}
			loaded = true
		}
		if err := r.handle(sctx, msg); err != nil {
			return r.progressed, err
		}
		pending.Store(false)
	}
}

// stoppedError is the error a client stops on: a refusal that cannot heal.
type stoppedError struct{ err *SubscribeError }

func (e *stoppedError) Error() string {
	return "cacheclient: client stopped, retrying cannot help: " + strings.TrimPrefix(e.err.Error(), "cacheclient: ")
}

func (e *stoppedError) Unwrap() []error { return []error{ErrStopped, e.err} }

// errorBox holds an error for an atomic.Pointer (the cause of a wait's failure).
type errorBox struct{ err error }
