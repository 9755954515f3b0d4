package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/statecast/statecast/cmd/internal/bench"
)

// benchmarks is the list `cachebench` prints (sorted by name) and runs.
var benchmarks = []bench.Benchmark{
	{Name: "distributor-snapshot", About: "full snapshot rows/s vs COPY and raw sarama limits",
		Run: runDistributorSnapshot},
	{Name: "distributor-latency", About: "polling capture: commit -> record in Kafka p50/p99, with and without LISTEN",
		Run: runDistributorLatency},
	{Name: "capture-latency", About: "WAL capture: commit -> visible in a cacheclient Get (inserts, updates, deletes) and WaitFor, vs pg_recvlogical's decode latency",
		Run: runCaptureLatency},
	{Name: "capture-throughput", About: "WAL capture: concurrent multi-row writers, the cache's apply rate and lag, and its catch-up rate vs pg_recvlogical's on one backlog",
		Run: runCaptureThroughput},
	{Name: "capture-bulk", About: "WAL capture: one transaction updating 1 M rows, and a parent of 100 k joined children renamed and moved, vs the start-up snapshot; the distributor's memory",
		Run: runCaptureBulk},
	{Name: "capture-fanout", About: "WAL capture: a competition rename reaching its 10,000 rows of a three-table join view, vs re-reading the whole view",
		Run: runCaptureFanout},
	{Name: "capture-sportsbook", About: "WAL capture: commit -> visible per view of a sportsbook of real size (joins, aggregates, EXISTS, UNION ALL, window, DISTINCT ON, subqueries, CTE beside single-table views), 4 writers at 1,000 commits/s, vs the single-table views and capture-latency alone",
		Run: runCaptureSportsbook},
	{Name: "player-delay", About: "delivery delay (player vs bare gRPC fan-out vs sarama consumers), 2-20 targets x 1-10 KB at 1,000 entries/s",
		Run: runPlayerDelay},
	{Name: "player-throughput", About: "fan-out throughput to 20 targets with 1 KB entries vs a raw gRPC fan-out on loopback",
		Run: runPlayerThroughput},
	{Name: "player-scale", About: "1,000 subscribers over 100 views at 10,000 entries/s of 200 bytes, one stalled target: lag and memory",
		Run: runPlayerScale},
	{Name: "player-select", About: "10,000 targets each selecting one tenant of a 1 M-row view at 10,000 changes/s vs 100 targets of the whole view: lag, the player's memory per target and CPU per change (player in a child process)",
		Run: runPlayerSelect},
}

func main() {
	if code, child := bench.ChildMain(); child {
		os.Exit(code) // a benchmark's distributor, run alone (capture-bulk)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, "cachebench", benchmarks, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
