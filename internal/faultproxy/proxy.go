package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards every connection it accepts on 127.0.0.1 to its target and injects the
// faults of the package comment. Its methods may be called from any goroutine.
type Proxy struct {
	ln    net.Listener
	setup func(client net.Conn) (Link, error)

	mu     sync.Mutex
	target string
	holed  bool
	healed chan struct{} // closed while not holed (a new one per Blackhole)
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // both connections of every link, and clients not linked yet
	wg     sync.WaitGroup
}

// Direction is a set of a link's two directions.
type Direction uint8

const (
	// ToServer is what the client sends. A Blackhole that holds it also holds a new
	// connection before the server is dialled: accepted, and unanswered.
	ToServer Direction = 1 << iota
	// ToClient is what the server sends.
	ToClient
	// Both directions.
	Both = ToServer | ToClient
)

// Link is how the proxy forwards one connection: what a Setup decided for it.
type Link struct {
	// Preamble is written to the server first, before what the client sends next: what
	// Setup read of the client's first bytes, to be passed on.
	Preamble []byte
	// Hold is what a Blackhole holds of this link (zero: nothing).
	Hold Direction
	// ServerReadBuffer, when > 0, is the socket receive buffer (SO_RCVBUF) of the link's
	// server connection: a small one makes a server whose output is held block soon,
	// instead of filling the kernel's buffers.
	ServerReadBuffer int
}

// Option configures a Proxy.
type Option func(*Proxy)

// WithSetup makes setup see every accepted connection before the server is dialled: it may
// read from the client and answer it (a protocol's preamble), and returns how the
// connection is forwarded; an error drops the connection. Without one, a link holds Both
// and has no preamble.
func WithSetup(setup func(client net.Conn) (Link, error)) Option {
	return func(p *Proxy) { p.setup = setup }
}

// New starts a proxy listening on 127.0.0.1 (a free port) that forwards to target
// ("host:port"; empty until SetTarget, for a server whose address is known only after the
// proxy's).
func New(target string, opts ...Option) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	close(p.healed)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's listening address ("127.0.0.1:port"), the one a component is given
// instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetTarget changes where new connections go.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Links is the number of links (client and server connection pairs) open now.
func (p *Proxy) Links() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Blackhole stops forwarding what the links hold (Link.Hold) until Heal. Nothing is
// closed: the bytes wait in the proxy and in the kernels' buffers.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.healed = make(chan struct{})
	}
}

// Heal ends a Blackhole: the held bytes are forwarded first, so a request that was on the
// wire when the hole opened lands late, as after a long stall.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holed {
		p.holed = false
		close(p.healed)
	}
}

// Reset closes every live connection with an RST and returns how many links there were.
// New connections are forwarded as before.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Every connection gets linger 0 (its close sends an RST, not a FIN) before any is
	// closed: closing one side makes its link's goroutines close the other side at once,
	// which must not beat this loop to it with a FIN.
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	for c := range p.conns {
		_ = c.Close()
	}
	return len(p.conns) / 2 // each link holds two connections
}

// Cut closes every live connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore ends a Cut: new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy, closes every connection and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Heal()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// gate blocks while a black hole is open; false when the proxy closed meanwhile.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	ch := p.healed
	p.mu.Unlock()
	<-ch
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track registers c for Reset, Cut and Close; false (c is not registered) while the
// proxy is cut or closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// serve forwards one client connection until both directions ended.
func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		_ = client.Close()
		return
	}
	defer p.untrack(client)
	link := Link{Hold: Both}
	if p.setup != nil {
		var err error
		if link, err = p.setup(client); err != nil {
			return
		}
	}
	up, down := link.Hold&ToServer != 0, link.Hold&ToClient != 0
	if up && !p.gate() { // a connection made during a black hole waits, unanswered
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !p.track(server) { // cut or closed while dialling
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	if tc, ok := server.(*net.TCPConn); ok && link.ServerReadBuffer > 0 {
		_ = tc.SetReadBuffer(link.ServerReadBuffer)
	}
	if len(link.Preamble) > 0 && !p.send(server, link.Preamble, up) {
		return
	}
	done := make(chan bool, 2)
	go func() { done <- p.pipe(server, client, up) }()
	go func() { done <- p.pipe(client, server, down) }()
	if eof := <-done; !eof {
		// Not a clean close (a reset, an error): end the other direction too.
		_ = client.Close()
		_ = server.Close()
	}
	<-done
}

// pipe copies src to dst, holding each chunk while a black hole is open when hold. At
// src's clean end it half-closes dst (the peer sees the FIN) and reports true.
func (p *Proxy) pipe(dst, src net.Conn, hold bool) (eof bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.send(dst, buf[:n], hold) {
			return false
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return true
				}
			}
			return false
		}
	}
}

// send writes b to dst, after a black hole when hold; false when the proxy closed
// meanwhile or the write failed.
func (p *Proxy) send(dst net.Conn, b []byte, hold bool) bool {
	if hold && !p.gate() {
		return false
	}
	_, err := dst.Write(b)
	return err == nil
}
