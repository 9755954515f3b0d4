// Package grpctls holds the TLS transport credentials of statecast's gRPC clients.
//
// ClientCredentials is credentials.NewTLS with a read buffer under the TLS connection.
// crypto/tls reads its records from the socket one at a time, a header and then a body, so
// a flush of the player's 32 KiB write buffer (two or three records) costs the client
// several read system calls where a plaintext connection, read through gRPC's own buffer,
// costs one. With the buffer the records of a flush come in with one call, as in
// plaintext; the decryption is unchanged.
package grpctls

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
)

// ReadBuffer is the size of the read buffer under each client TLS connection: more than
// one flush of the player's write buffer with its TLS records' overhead.
const ReadBuffer = 64 << 10

// ClientCredentials returns TLS transport credentials for a gRPC client from cfg, whose
// connections read the socket through a ReadBuffer-byte buffer.
func ClientCredentials(cfg *tls.Config) credentials.TransportCredentials {
	return bufferedCreds{credentials.NewTLS(cfg)}
}

type bufferedCreds struct {
	credentials.TransportCredentials
}

func (c bufferedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, &bufferedConn{Conn: raw, r: bufio.NewReaderSize(raw, ReadBuffer)})
}

func (c bufferedCreds) Clone() credentials.TransportCredentials {
	return bufferedCreds{c.TransportCredentials.Clone()}
}

// bufferedConn is a socket whose reads go through r. Only the TLS connection above it
// reads it, so nothing is left behind in r when the connection ends.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
