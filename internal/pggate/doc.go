// Package pggate is a TCP proxy in front of PostgreSQL that can hold the replication
// connections alone: a distributor behind it keeps running its queries while its WAL
// stream waits, so a backlog builds up in its own slot. Benchmarks time the catch-up;
// tests check what a cycle does with a backlog. It is internal/faultproxy with a Setup
// that reads PostgreSQL's startup message.
//
// One file, gate.go, holds it: Gate (Start, Hold, Release, Close) and the Setup that reads
// the startup message to tell replication connections apart (which is why the gate refuses
// TLS). Its goroutines are the proxy's.
package pggate
