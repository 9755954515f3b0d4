package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"
)

// playerBenchmark is one `cachebench <name>` benchmark of the player (issue 3 §6).
type playerBenchmark struct {
	summary string
	run     func(ctx context.Context, args []string, w io.Writer) error
}

func init() {
	for name, b := range playerBenchmarks {
		run := b.run
		register(name, b.summary, func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
	}
}

// playerBenchmarks lists the player benchmarks by name.
var playerBenchmarks = map[string]playerBenchmark{
	"player-delay": {"delivery delay (player vs bare gRPC fan-out vs sarama consumers), 2-20 targets x 1-10 KB at 1,000 entries/s",
		runPlayerDelay},
	"player-throughput": {"fan-out throughput to 20 targets with 1 KB entries vs a raw gRPC fan-out on loopback",
		runPlayerThroughput},
	"player-scale": {"1,000 subscribers over 100 views at 10,000 entries/s of 200 bytes, one stalled target: lag and memory",
		runPlayerScale},
}

// brokersFlag registers -brokers with the default from STATECAST_KAFKA_BROKERS.
func brokersFlag(fs *flag.FlagSet) *string {
	return fs.String("brokers", os.Getenv("STATECAST_KAFKA_BROKERS"), "Kafka brokers (comma-separated; default $STATECAST_KAFKA_BROKERS)")
}

func splitBrokers(s string) ([]string, error) {
	if s == "" {
		return nil, fmt.Errorf("no Kafka brokers: set -brokers or STATECAST_KAFKA_BROKERS (make infra; . .run/env)")
	}
	return strings.Split(s, ","), nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// latencies of the deliveries with index >= from (after the warm-up), stamp → applied,
// and, when acks is non-nil, acknowledged-by-Kafka → applied.
func latencies(rs []*receiver, from int64, acks *ackLog) (stamped, acked []time.Duration, missingAck int) {
	for _, r := range rs {
		r.mu.Lock()
		for _, d := range r.got {
			if d.index < from {
				continue
			}
			stamped = append(stamped, time.Duration(d.applied-d.stamp))
			if acks != nil {
				if t, ok := acks.get(d.index); ok {
					acked = append(acked, time.Duration(d.applied-t.UnixNano()))
				} else {
					missingAck++
				}
			}
		}
		r.mu.Unlock()
	}
	return stamped, acked, missingAck
}

// dispatchSpans returns dispatch → applied for the deliveries with index >= from, the
// dispatch times (unix ns) given by index.
func dispatchSpans(rs []*receiver, dispatched map[int64]int64, from int64) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		r.mu.Lock()
		for _, d := range r.got {
			if at, ok := dispatched[d.index]; ok && d.index >= from {
				out = append(out, time.Duration(d.applied-at))
			}
		}
		r.mu.Unlock()
	}
	return out
}

// perFrame is the mean number of entries per batch frame the receivers got.
func perFrame(rs []*receiver) float64 {
	var e, f int
	for _, r := range rs {
		r.mu.Lock()
		e, f = e+len(r.got), f+r.batches
		r.mu.Unlock()
	}
	if f == 0 {
		return 0
	}
	return float64(e) / float64(f)
}

func allHave(rs []*receiver, n int) bool {
	for _, r := range rs {
		if !r.stalled && r.count() < n {
			return false
		}
	}
	return true
}

// profileFiles names the profiles to write (empty = not taken).
type profileFiles struct{ cpu, mutex, block, mem, trace string }

// profiles starts the requested profiles; the returned function writes them.
func profiles(pf profileFiles) (func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if pf.cpu != "" {
		f, err := os.Create(pf.cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if pf.trace != "" {
		f, err := os.Create(pf.trace)
		if err != nil {
			stop()
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return nil, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	lookup := func(name, file string) {
		stops = append(stops, func() {
			if f, err := os.Create(file); err == nil {
				_ = pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		})
	}
	if pf.mutex != "" {
		runtime.SetMutexProfileFraction(5)
		lookup("mutex", pf.mutex)
	}
	if pf.block != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		lookup("block", pf.block)
	}
	if pf.mem != "" {
		lookup("allocs", pf.mem)
	}
	return stop, nil
}
