package grpctls

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/statecast/statecast/internal/testenv"
)

// countingConn counts the reads that reach the socket.
type countingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

// readsOf has a TLS server write 48 KiB in one Write (three TLS records) and returns how
// many reads the client's socket took to deliver them, with creds on the client.
func readsOf(t *testing.T, newCreds func(*tls.Config) credentials.TransportCredentials) int64 {
	t.Helper()
	pki := testenv.NewPKI(t)
	creds := newCreds(&tls.Config{RootCAs: pki.Pool})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	payload := bytes.Repeat([]byte("statecast"), 48<<10/9)
	written := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			written <- err
			return
		}
		defer c.Close()
		s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pki.Server}, NextProtos: []string{"h2"}})
		if err := s.Handshake(); err != nil {
			written <- err
			return
		}
		_, err = s.Write(payload)
		written <- err
		io.Copy(io.Discard, s) // until the client closes
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingConn{Conn: raw}
	conn, _, err := creds.ClientHandshake(context.Background(), "localhost", counted)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	before := counted.reads.Load()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the client read other bytes than the server wrote")
	}
	return counted.reads.Load() - before
}

// TestClientCredentialsReadsAtOnce: the three records of one server write, already in the
// socket, reach the client's TLS connection with one read of the socket through
// ClientCredentials (two if the last bytes were not in the socket yet); through
// credentials.NewTLS they take a read per record or more.
func TestClientCredentialsReadsAtOnce(t *testing.T) {
	plain := readsOf(t, credentials.NewTLS)
	buffered := readsOf(t, ClientCredentials)
	t.Logf("socket reads for 48 KiB in three TLS records: %d through credentials.NewTLS, %d through ClientCredentials", plain, buffered)
	if buffered > 2 {
		t.Errorf("ClientCredentials: %d socket reads, want 1", buffered)
	}
	if plain < 3 {
		t.Errorf("credentials.NewTLS: %d socket reads, want 3 or more (the test no longer shows what the buffer saves)", plain)
	}
}
