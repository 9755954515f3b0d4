// Command cachebench runs statecast's benchmarks against the real PostgreSQL and Kafka
// (STATECAST_PG_DSN, STATECAST_KAFKA_BROKERS; `make infra` starts them).
//
//	cachebench                 lists the benchmarks
//	cachebench <name> [flags]  runs one; `cachebench <name> -h` shows its flags
//
// Every benchmark prints the baseline it is compared with, measured in the same run. Each
// benchmark's file holds its flags and its scenario; the instruments they share are in
// cmd/internal/bench. docs/BENCHMARKS.md says what each one measures and its latest result.
//
// Files: main.go (the list of benchmarks and main), one file per benchmark, named after
// it: distributor_snapshot.go, distributor_latency.go, capture_latency.go,
// capture_throughput.go, capture_fanout.go, player_delay.go, player_throughput.go,
// player_scale.go, player_select.go (targets selecting one tenant each of a large view,
// the player in a child process), capture_sportsbook.go (a sportsbook's views of every shape in one
// stream under four writers) with capture_sportsbook_own.go (its pipelines, and its
// single-table views in a stream of their own beside it), capture_bulk.go (one transaction changing a 1M-row view's
// every row, against the view's start-up snapshot); and capture.go, what the capture benchmarks share (their flags, their
// table and view, the goals' verdict lines, and the pg_recvlogical floor they are compared
// with).
package main
