// Package devenv is the local development environment behind `cachectl dev` (make demo):
// statecast's main job end to end on embedded defaults. Dev seeds the demo sportsbook
// database (examples/sportsbook/demo: demo.Seed), starts an in-process Kafka-protocol
// broker (franz-go kfake, kafka.go), runs the distributor with the demo config (capturing
// the database's WAL through a replication slot named after the database), an in-process
// player serving gRPC and the sportsbook example service (examples/sportsbook, embedding
// cacheclient) serving HTTP (pipeline.go); it prints the stream (cmd/internal/ctl's Tail
// and Printer: source transactions, position records, idle ones counted), applies
// scripted database changes and, for each, waits with cacheclient's WaitFor for the WAL
// position read after its COMMIT and shows it in the stream and in the service's memory
// (changes.go, script.go, show.go); it sends the service's read-your-writes requests
// (script.go), then checks that every cached view and index equals its SQL query
// (converge.go).
//
// Files: dev.go (DevOptions, Dev), run.go (one run: start order, the stream printer,
// serving, shutdown), changes.go (the scripted changes and what the cache must then show),
// script.go (applying them; the read-your-writes requests), pipeline.go (player, service),
// show.go (HTTP answers rendered), converge.go (cache vs SQL), logsink.go (the service's
// log, printed at the demo's checkpoints), kafka.go (Broker, the in-process broker),
// status.go (the status pages of the distributor, the player and the cache, served on one
// local address whose URLs the demo prints).
//
// Goroutines: Dev runs in the caller's goroutine and starts the distributor's Run, the
// stream printer (Tail), the player's Run and Serve, the cache client, the HTTP server and
// the status pages' server;
// it stops them in reverse start order, drops the replication slot once the distributor
// stopped, and returns only after all of them stopped. Output goes through one locked
// writer; the service's log is buffered (logSink) and written by Dev's goroutine.
package devenv
