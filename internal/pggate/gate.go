package pggate

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/internal/faultproxy"
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
	p *faultproxy.Proxy
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
	p, err := faultproxy.New(net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), faultproxy.WithSetup(setup))
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return &Gate{p: p}, u.String(), nil
}

// Hold stops forwarding what the server sends on replication connections (at most one
// read of gateReadBuffer bytes per connection is already in the gate).
func (g *Gate) Hold() { g.p.Blackhole() }

// Release forwards again.
func (g *Gate) Release() { g.p.Heal() }

// Close stops the gate and closes every connection through it.
func (g *Gate) Close() { g.p.Close() }

// setup reads a client's startup message and passes it on: a replication connection's
// link is held by Hold in what the server sends, others never are.
func setup(client net.Conn) (faultproxy.Link, error) {
	startup, replication, err := readStartup(client)
	if err != nil {
		return faultproxy.Link{}, err
	}
	link := faultproxy.Link{Preamble: startup}
	if replication {
		link.Hold, link.ServerReadBuffer = faultproxy.ToClient, gateReadBuffer
	}
	return link, nil
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
