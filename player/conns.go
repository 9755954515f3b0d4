package player

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/peer"
)

// Connections are bounded before any call is made on them: gRPC keeps a connection that
// answers its pings open for ever, and one costs about 60 KiB, so without a bound anyone
// who can reach the port could hold the player's memory with connections that never
// authenticate. The listener of Serve counts every connection it accepts and closes at once
// one past Config.MaxConns, or past Config.MaxUnauthenticatedConns of those not yet
// authenticated; each connection has Config.AuthTimeout to make its first authenticated
// call, after which it is closed. The interceptors find a call's connection through its
// peer address, which the connection itself provides (connAddr): they mark it
// authenticated, or close it after a failed authentication.

// connTracker counts the connections of a player's gRPC listeners.
type connTracker struct {
	maxConns, maxUnauth int
	authTimeout         time.Duration
	log                 *slog.Logger
	refused             *prometheus.CounterVec // by reason
	closed              *prometheus.CounterVec // by reason
	refusedLog          logLimiter

	mu           sync.Mutex
	open, unauth int
}

// Reasons of statecast_player_connections_refused_total and _closed_total.
const (
	reasonMaxConns    = "max_connections"
	reasonMaxUnauth   = "max_unauthenticated"
	reasonAuthTimeout = "auth_timeout"
	reasonAuthFailed  = "auth_failed"
)

func newConnTracker(c *Config, log *slog.Logger) *connTracker {
	return &connTracker{
		maxConns: c.MaxConns, maxUnauth: c.MaxUnauthenticatedConns, authTimeout: c.AuthTimeout, log: log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "connections_refused_total",
			Help: "gRPC connections closed as soon as they were accepted, by the bound they were past (max_connections, max_unauthenticated).",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "statecast", Subsystem: "player", Name: "connections_closed_total",
			Help: "gRPC connections the player closed: auth_timeout (no authenticated call within auth_timeout), auth_failed (after a failed authentication).",
		}, []string{"reason"}),
	}
}

var descConns = prometheus.NewDesc("statecast_player_connections", "gRPC connections open, by state (authenticated: it made an authenticated call).", []string{"state"}, nil)

func (t *connTracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConns
	t.refused.Describe(ch)
	t.closed.Describe(ch)
}

func (t *connTracker) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	open, unauth := t.open, t.unauth
	t.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(open-unauth), "authenticated")
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(unauth), "unauthenticated")
	t.refused.Collect(ch)
	t.closed.Collect(ch)
}

// listener wraps ln so that its connections are tracked.
func (t *connTracker) listener(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, t: t}
}

type trackedListener struct {
	net.Listener
	t *connTracker
}

// Accept returns the next connection within the bounds; those past them are closed here,
// so that gRPC never starts a handshake or a transport for them.
func (l *trackedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.t.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// admit tracks c, or closes it and returns nil when a bound is reached.
func (t *connTracker) admit(c net.Conn) *trackedConn {
	t.mu.Lock()
	reason := ""
	switch {
	case t.open >= t.maxConns:
		reason = reasonMaxConns
	case t.unauth >= t.maxUnauth:
		reason = reasonMaxUnauth
	default:
		t.open++
		t.unauth++
	}
	t.mu.Unlock()
	if reason != "" {
		// Counted first: whoever sees the connection closed sees it counted.
		t.refused.WithLabelValues(reason).Inc()
		_ = c.Close()
		if ok, suppressed := t.refusedLog.allow(); ok {
			t.log.Warn("connection refused: too many connections", "peer", c.RemoteAddr().String(), "bound", reason,
				"max_connections", t.maxConns, "max_unauthenticated_connections", t.maxUnauth, "suppressed", suppressed)
		}
		return nil
	}
	tc := &trackedConn{Conn: c, t: t, gate: make(chan struct{}, 1)}
	tc.addr = &connAddr{Addr: c.RemoteAddr(), c: tc}
	t.mu.Lock() // the timer's function reads tc.timer under it
	tc.timer = time.AfterFunc(t.authTimeout, func() { tc.closeFor(reasonAuthTimeout, true) })
	t.mu.Unlock()
	return tc
}

// trackedConn is an accepted connection. Its state is under the tracker's lock.
type trackedConn struct {
	net.Conn
	t       *connTracker
	addr    *connAddr
	timer   *time.Timer
	authed  bool
	gone    bool // closed and uncounted
	failed  bool // an authentication failed: the connection is to be closed
	closing bool // its close is scheduled
	// gate lets one authentication at a time through on a connection not yet
	// authenticated (a buffered channel of one, not a mutex: a waiter gives up when its
	// call ends).
	gate chan struct{}
}

// connAddr is a tracked connection's remote address as gRPC sees it (peer.Addr of its
// calls): its String is the address's, and it leads back to the connection.
type connAddr struct {
	net.Addr
	c *trackedConn
}

// RemoteAddr is the connection's connAddr (gRPC takes a call's peer address from it, also
// through TLS, whose connection asks the one beneath).
func (c *trackedConn) RemoteAddr() net.Addr { return c.addr }

func (c *trackedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// release uncounts the connection (once).
func (c *trackedConn) release() {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.gone {
		return
	}
	c.gone = true
	t.open--
	if !c.authed {
		t.unauth--
	}
	c.timer.Stop()
}

// authenticated marks the connection as having made an authenticated call: the time bound
// no longer applies, and it no longer counts as unauthenticated.
func (c *trackedConn) authenticated() {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.authed || c.gone {
		return
	}
	c.authed = true
	t.unauth--
	c.timer.Stop()
}

// closeFor closes the connection for reason; onlyUnauth: unless it authenticated
// meanwhile (the time bound, whose timer may fire as it does).
func (c *trackedConn) closeFor(reason string, onlyUnauth bool) {
	c.t.mu.Lock()
	skip := c.gone || onlyUnauth && c.authed
	c.t.mu.Unlock()
	if skip {
		return
	}
	c.t.closed.WithLabelValues(reason).Inc()
	_ = c.Close()
}

// enter waits for the connection's turn to authenticate a call, when it has not
// authenticated yet: the streams a client opens at once on a fresh connection then try
// their credentials one after the other, so that a failure (answered after
// Config.AuthFailureDelay, then fatal to the connection) stops the rest before they are
// checked, and one connection is one guess. It reports false when done ended first, or
// when an earlier call failed (the call is refused unchecked); leave ends the turn.
func (c *trackedConn) enter(done <-chan struct{}) (ok bool, leave func()) {
	c.t.mu.Lock()
	authed := c.authed
	c.t.mu.Unlock()
	if authed {
		return true, func() {}
	}
	select {
	case c.gate <- struct{}{}:
	case <-done:
		return false, func() {}
	}
	leave = func() { <-c.gate }
	c.t.mu.Lock()
	failed := c.failed
	c.t.mu.Unlock()
	return !failed, leave
}

// fail marks the connection as having failed to authenticate: the calls waiting for their
// turn are refused unchecked.
func (c *trackedConn) fail() {
	c.t.mu.Lock()
	c.failed = true
	c.t.mu.Unlock()
}

// closeSoon closes the connection after a failed authentication, once, a moment after the
// refusal was sent (closing at once could lose it, and the client would see a reset
// instead of the reason).
func (c *trackedConn) closeSoon() {
	c.t.mu.Lock()
	already := c.closing || c.gone
	c.closing = true
	c.t.mu.Unlock()
	if !already {
		time.AfterFunc(failedConnGrace, func() { c.closeFor(reasonAuthFailed, false) })
	}
}

// failedConnGrace is how long a connection stays after a failed authentication's refusal,
// for the refusal to reach the client.
const failedConnGrace = 100 * time.Millisecond

// connOf returns the tracked connection of a call's peer (nil: a listener the player does
// not track, or a call without a peer).
func connOf(pr *peer.Peer, ok bool) *trackedConn {
	if !ok || pr == nil {
		return nil
	}
	if a, isTracked := pr.Addr.(*connAddr); isTracked {
		return a.c
	}
	return nil
}

// logLimiter lets through at most one log line a second, and counts those it held back:
// a flood of refusals must not become a flood of log lines.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *logLimiter) allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.last) >= time.Second {
		l.last, suppressed, l.suppressed = now, l.suppressed, 0
		return true, suppressed
	}
	l.suppressed++
	return false, 0
}
