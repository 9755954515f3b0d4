// Package bench holds the parts of cmd/cachebench that more than one benchmark uses: the
// list of benchmarks and its command line, latency summaries and the same-run ratios and
// verdicts, timestamped payloads and pacing, a Kafka producer that logs when each record
// was acknowledged, the in-process gRPC receivers, the bare gRPC fan-out and the plain
// sarama consumers that serve as baselines, an in-process player and distributor, and
// profiling. For the WAL capture benchmarks: the writers (Workload: each transaction's xid
// and commit times), the capture path in process (Pipeline: a wal distributor and a
// player; Cache: a cacheclient with a Probe per view that records when a transaction
// became visible), pg_recvlogical as the floor (RecvLogical, reading pgoutput), and
// the slots' clean-up (a slot left behind keeps the server's WAL forever).
//
// Every benchmark prints the baseline it is compared with, measured in the same run: the
// machine a benchmark runs on is rarely quiet, and only a ratio measured side by side
// survives that. The command files of cmd/cachebench hold each benchmark's flags and
// scenario; this package holds the measuring instruments, so that two benchmarks that
// report the same quantity compute it the same way.
//
// Receivers, consumers and the fan-out record what they receive under their own locks;
// read them (Latencies, DispatchSpans, AllHave) from any goroutine.
package bench
