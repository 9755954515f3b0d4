package testenv

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port was free when it was
// chosen, for a server under test that listens on an address from its config.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
