package chaos

import (
	"errors"
	"io"
	"net"
	"sync"
)

// proxy is a TCP proxy on one hop (one component to one server): every connection of the
// component goes through it, so a fault on the hop touches that component only.
//
// Reset closes every live connection with a TCP RST (both sides see "connection reset");
// new connections are forwarded as before. Blackhole stops forwarding in both directions
// without closing anything: connections stay open, their bytes wait (in the proxy and in
// the kernels' buffers), and new connections are accepted but not forwarded — what a
// network partition or a dead host looks like to both ends until their own timeouts. Heal
// forwards again, the waiting bytes first: a request that was on the wire when the hole
// opened lands late, as after a long stall.
type proxy struct {
	name string
	ln   net.Listener

	mu     sync.Mutex
	target string
	holed  bool
	healed chan struct{} // closed by Heal (a new one per Blackhole)
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(name, target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{name: name, ln: ln, target: target, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the component is given instead of the server's.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetTarget changes where new connections go.
func (p *proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// live is the number of links (client and server connection pairs) open now.
func (p *proxy) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Reset closes every live connection with an RST and returns how many there were.
func (p *proxy) Reset() int {
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

// Blackhole stops forwarding until Heal.
func (p *proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.healed = make(chan struct{})
	}
}

// Heal ends a Blackhole.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holed {
		p.holed = false
		close(p.healed)
	}
}

// Close stops the proxy and closes its connections.
func (p *proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Heal()
	p.Reset()
	p.wg.Wait()
}

// gate blocks while the hole is open; false when the proxy closed meanwhile.
func (p *proxy) gate() bool {
	p.mu.Lock()
	ch := p.healed
	p.mu.Unlock()
	<-ch
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		_ = client.Close()
		return
	}
	defer p.untrack(client)
	if !p.gate() { // a connection made during a black hole waits, unanswered
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan bool, 2)
	go func() { done <- p.pipe(server, client) }()
	go func() { done <- p.pipe(client, server) }()
	if eof := <-done; !eof {
		// Not a clean close (a reset, an error): end the other direction too.
		_ = client.Close()
		_ = server.Close()
	}
	<-done
}

// pipe copies src to dst, holding each chunk while the hole is open. At src's clean end it
// half-closes dst (the peer sees the FIN) and reports true.
func (p *proxy) pipe(dst, src net.Conn) (eof bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return false
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
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
