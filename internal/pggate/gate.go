// Package pggate is a TCP proxy in front of PostgreSQL that can hold the replication
// connections alone: a distributor behind it keeps running its queries while its WAL
// stream waits, so a backlog builds up in its own slot. Benchmarks time the catch-up;
// tests check what a cycle does with a backlog.
package pggate

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// Gate is a TCP proxy in front of PostgreSQL that can hold what the server sends on
// replication connections. A distributor connected through it keeps its replication
// session while held: the server's walsender fills the socket and waits, the slot keeps
// the WAL, and the distributor's queries (its other connections) go through. Released,
// the distributor catches up on the WAL written meanwhile as fast as it can: a backlog
// of WAL decoded by the distributor's own slot, the same path as live changes.
//
// The gate refuses TLS (it answers a client's SSLRequest with 'N') because it reads the
// startup message to tell replication connections apart: point it at a server reached
// without TLS (sslmode=disable or prefer).
type Gate struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	held   bool
	open   chan struct{} // closed while not held
	closed bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// gateReadBuffer is the socket receive buffer of the gate's server side: small, so that
// a held walsender stops decoding soon (what sits in the sockets is decoded already).
const gateReadBuffer = 64 << 10

// Start starts a gate in front of the server of dsn (a URL) and returns the same DSN
// through the gate.
func Start(dsn string) (*Gate, string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, "", err
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return nil, "", fmt.Errorf("pggate: the DSN must be a URL: %q", dsn)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	g := &Gate{ln: ln, target: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), open: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(g.open)
	u.Host = ln.Addr().String()
	g.wg.Go(g.accept)
	return g, u.String(), nil
}

// Hold stops forwarding what the server sends on replication connections (at most one
// read of gateReadBuffer bytes per connection is already in the gate).
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		g.held = true
		g.open = make(chan struct{})
	}
}

// Release forwards again.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.open)
	}
}

// Close stops the gate and closes every connection through it.
func (g *Gate) Close() {
	_ = g.ln.Close()
	g.Release()
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// track adds c to the connections Close closes (false: the gate is closed) or removes it.
func (g *Gate) track(c net.Conn, add bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !add {
		delete(g.conns, c)
		return true
	}
	if g.closed {
		return false
	}
	g.conns[c] = true
	return true
}

func (g *Gate) accept() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.wg.Go(func() { g.serve(c) })
	}
}

// serve proxies one client connection.
func (g *Gate) serve(client net.Conn) {
	defer client.Close()
	if !g.track(client, true) {
		return
	}
	defer g.track(client, false)
	startup, replication, err := readStartup(client)
	if err != nil {
		return
	}
	server, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer server.Close()
	if !g.track(server, true) {
		return
	}
	defer g.track(server, false)
	if tc, ok := server.(*net.TCPConn); ok && replication {
		_ = tc.SetReadBuffer(gateReadBuffer)
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
		done <- struct{}{}
	}()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if replication {
					g.mu.Lock()
					open := g.open
					g.mu.Unlock()
					<-open
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = client.Close()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// Protocol codes of the requests a client may send before its startup message.
const (
	sslRequest    = 80877103
	gssencRequest = 80877104
)

// readStartup reads the client's startup message, answering 'N' (no) to TLS and GSS
// encryption requests, and reports whether it asks for a replication connection.
func readStartup(c net.Conn) (msg []byte, replication bool, err error) {
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil, false, err
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n < 8 || n > 1<<16 {
			return nil, false, fmt.Errorf("pggate: startup message of %d bytes", n)
		}
		msg = make([]byte, n)
		copy(msg, hdr[:])
		if _, err := io.ReadFull(c, msg[8:]); err != nil {
			return nil, false, err
		}
		switch binary.BigEndian.Uint32(hdr[4:]) {
		case sslRequest, gssencRequest:
			if _, err := c.Write([]byte{'N'}); err != nil {
				return nil, false, err
			}
			continue
		}
		// Parameters: name\0value\0 ... \0.
		params := strings.Split(string(msg[8:]), "\x00")
		for i := 0; i+1 < len(params); i += 2 {
			if params[i] == "replication" {
				switch strings.ToLower(params[i+1]) {
				case "false", "off", "no", "0":
				default:
					replication = true
				}
			}
		}
		return msg, replication, nil
	}
}
