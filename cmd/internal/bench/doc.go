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
//
// Files:
//
//   - the command: registry.go (Benchmark, Main, Args: the list and the command line),
//     flags.go (flag helpers), profile.go (the profiling flags and Layout);
//   - measuring: summary.go (Summary, Quantile, Ratio, Verdict, Rate, Pool), histogram.go
//     (a Prometheus histogram read back), payload.go (timestamped payloads), pace.go
//     (Pace, Every, WaitFor);
//   - Kafka: kafka.go (topics and end offsets), producer.go (Producer and its AckLog,
//     ProduceSync, ProduceAsync), consumers.go (plain sarama consumers, a baseline),
//     arrivals.go (when each key first reached a topic);
//   - delivery: receiver.go (the in-process gRPC receivers and what they recorded),
//     fanout.go (the bare gRPC fan-out, a baseline), barekafka.go (that fan-out fed from
//     Kafka like the player's fetcher), player.go (an in-process player), distributor.go
//     (DistEnv, the database and Kafka of a distributor benchmark, and an in-process
//     distributor), child.go (StartChildDistributor: a distributor alone in a child
//     process, its peak RSS and Go heap measured per phase), childplayer.go
//     (StartChildPlayer: a player alone in a child process, its CPU time and live heap)
//     with delayhist.go (DelayHist, its own dispatch → written delay histogram);
//   - WAL capture: workload.go (Workload, the writers and their transactions' xids and
//     commit times), capture.go (Pipeline, Cache, Publication), probe.go (Probe, when a
//     transaction became visible in a view), recvlogical.go (RecvLogical, pg_recvlogical
//     as the floor) with pgoutput.go (its output split into pgoutput messages), slots.go
//     (creating and dropping slots), sportsbook.go (the sportsbook workload: writers that
//     know which view rows each commit changes) with sportsbook_schema.go (its schema of
//     real size, its seeding, its views of every shape), positions.go (PositionWatch: when a position record became
//     readable in Kafka, from the topic's last stable offset).
package bench
