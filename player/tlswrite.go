package player

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// coalescingCreds are TLS transport credentials whose connections write each Write's TLS
// records with one system call. crypto/tls writes every record (at most 16 KiB of
// plaintext) to the socket on its own, so a flush of gRPC's 32 KiB write buffer takes two
// or three write calls where plaintext takes one; on a player that streams large entries
// to many targets those calls, not the encryption, are most of what TLS costs.
type coalescingCreds struct {
	credentials.TransportCredentials
}

func (c coalescingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	held := &heldConn{Conn: raw}
	conn, info, err := c.TransportCredentials.ServerHandshake(held)
	if err != nil {
		return nil, nil, err
	}
	return &coalescingConn{Conn: conn, held: held, direct: maxRecordPlaintext}, info, nil
}

func (c coalescingCreds) Clone() credentials.TransportCredentials {
	return coalescingCreds{c.TransportCredentials.Clone()}
}

func (c coalescingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

// maxRecordPlaintext is the most plaintext one TLS record carries.
const maxRecordPlaintext = 16 << 10

// coalescingConn is the TLS connection: during each Write, the records it produces are
// held and then written at once. A Write of at most direct bytes is one record (once
// crypto/tls has sent the first ~128 KB in small records: a few writes more, then): it
// goes straight through, without the hold's copy — a large entry to one target often fits.
type coalescingConn struct {
	net.Conn // the TLS connection, over held
	held     *heldConn
	direct   int
}

func (c *coalescingConn) Write(b []byte) (int, error) {
	if len(b) <= c.direct {
		return c.Conn.Write(b)
	}
	c.held.hold()
	n, err := c.Conn.Write(b)
	if ferr := c.held.release(); err == nil {
		err = ferr
	}
	return n, err
}

// heldConn is the socket under the TLS connection. While held, writes are appended to a
// buffer that release writes with one call. Other writes (the handshake, alerts, key
// updates sent from the reading side) pass through when not held; when they happen during a
// hold they join the buffer in the order crypto/tls made them (it serialises its writes).
type heldConn struct {
	net.Conn
	mu   sync.Mutex
	on   bool
	buf  []byte
	werr error // a failed release's error, returned by every later write
}

func (h *heldConn) hold() {
	h.mu.Lock()
	h.on = true
	h.mu.Unlock()
}

func (h *heldConn) Write(b []byte) (int, error) {
	h.mu.Lock()
	if h.werr != nil {
		err := h.werr
		h.mu.Unlock()
		return 0, err
	}
	if h.on {
		h.buf = append(h.buf, b...)
		h.mu.Unlock()
		return len(b), nil
	}
	h.mu.Unlock()
	return h.Conn.Write(b)
}

// release writes what the hold gathered and ends the hold.
func (h *heldConn) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = false
	if len(h.buf) == 0 || h.werr != nil {
		h.buf = h.buf[:0]
		return h.werr
	}
	_, err := h.Conn.Write(h.buf)
	if cap(h.buf) > 256<<10 {
		h.buf = nil // a rare large write does not stay pinned per connection
	} else {
		h.buf = h.buf[:0]
	}
	if err != nil {
		h.werr = err
	}
	return err
}
