package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
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

func allHave(rs []*receiver, n int) bool {
	for _, r := range rs {
		if !r.stalled && r.count() < n {
			return false
		}
	}
	return true
}

// profiles starts the requested profiles; the returned function writes them.
func profiles(cpu, mutex string) (func(), error) {
	var stops []func()
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(5)
		stops = append(stops, func() {
			if f, err := os.Create(mutex); err == nil {
				_ = pprof.Lookup("mutex").WriteTo(f, 0)
				f.Close()
			}
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}, nil
}
