// Package faultproxy is a TCP proxy that puts network faults between a client and its
// server: the outage tests (through internal/testenv's NewProxy and PostgresProxy), the
// chaos rig's hops (cmd/internal/chaos) and the gate that holds a distributor's replication
// stream (internal/pggate) all forward through it.
//
//	p, err := faultproxy.New("127.0.0.1:5432")
//	if err != nil { … }
//	defer p.Close()
//	// connect the component to p.Addr() instead of the server
//	p.Blackhole() // … p.Heal(), p.Reset(), p.Cut() … p.Restore()
//
// The faults, each on every connection through the proxy:
//
//   - Blackhole holds the bytes without closing anything, what a network partition or a
//     dead host looks like to both ends until their own timeouts; Heal delivers them.
//   - Reset closes every live connection with a TCP RST ("connection reset" on both ends);
//     new connections are forwarded as before.
//   - Cut closes every live connection and refuses new ones (accepted and closed at once,
//     so a client sees a broken connection, not a hang) until Restore.
//
// A Setup (WithSetup) sees each connection first and may speak a protocol's preamble with
// the client; its Link says what a Blackhole holds of that connection (pggate holds only
// what the server sends on replication connections). A clean end of one direction is
// forwarded as a half-close, so a client that shuts down its writing side still reads the
// server's answer.
//
// The package does not import testing: the chaos rig and the benchmarks use it outside
// tests.
//
// One file, proxy.go, holds it all: Proxy and its faults, Link, Direction and WithSetup.
// A Proxy's methods may be called from any goroutine (one mutex guards its state); it
// runs one goroutine that accepts, and per connection one that serves it and two that
// copy its two directions. Close stops accepting, closes every connection and waits for
// those goroutines.
package faultproxy
