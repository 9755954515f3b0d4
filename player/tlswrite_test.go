package player

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"testing"
)

// countingConn records each Write the socket receives.
type countingConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

// expect fails t unless the socket received exactly the writes want, in order.
func (c *countingConn) expect(t *testing.T, want ...string) {
	t.Helper()
	got := make([]string, len(c.writes))
	for i, w := range c.writes {
		got[i] = string(w)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("socket writes %q, want %q", got, want)
	}
}

// recordsConn stands for the TLS connection: each Write becomes several records, each
// written to the socket on its own.
type recordsConn struct {
	net.Conn
	under net.Conn
}

func (r recordsConn) Write(b []byte) (int, error) {
	for len(b) > 0 {
		n := min(len(b), 4)
		if _, err := r.under.Write(b[:n]); err != nil {
			return 0, err
		}
		b = b[n:]
	}
	return 0, nil
}

// TestCoalescingConnOneWrite: the records of one Write reach the socket in one call, in
// order; writes outside a Write (the handshake, alerts) pass through as they come.
func TestCoalescingConnOneWrite(t *testing.T) {
	sock := &countingConn{}
	held := &heldConn{Conn: sock}
	c := &coalescingConn{Conn: recordsConn{under: held}, held: held}
	if _, err := held.Write([]byte("hs")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	sock.expect(t, "hs", "0123456789", "abcdef")
}

// TestCoalescingConnError: a socket error is returned by the Write whose records failed,
// and by every later one (the connection is broken; nothing is written after a gap).
func TestCoalescingConnError(t *testing.T) {
	boom := errors.New("boom")
	sock := &countingConn{err: boom}
	held := &heldConn{Conn: sock}
	c := &coalescingConn{Conn: recordsConn{under: held}, held: held}
	if _, err := c.Write([]byte("0123456789")); !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want %v", err, boom)
	}
	sock.err = nil
	if _, err := c.Write([]byte("abc")); !errors.Is(err, boom) {
		t.Fatalf("second Write: %v, want %v", err, boom)
	}
	if len(sock.writes) != 0 {
		t.Fatalf("written after the error: %q", sock.writes)
	}
}

// TestCoalescingConnDirect: a Write no larger than direct goes straight through (its
// records are written as they are made: the fake makes 4-byte records, where crypto/tls
// makes one of up to 16 KiB); a larger one is still held and written once.
func TestCoalescingConnDirect(t *testing.T) {
	sock := &countingConn{}
	held := &heldConn{Conn: sock}
	c := &coalescingConn{Conn: recordsConn{under: held}, held: held, direct: 8}
	if _, err := c.Write([]byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	sock.expect(t, "abcd", "efgh", "0123456789")
}
