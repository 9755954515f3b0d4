// Command cachebench runs statecast's benchmarks against the real PostgreSQL and Kafka
// (STATECAST_PG_DSN, STATECAST_KAFKA_BROKERS; `make infra` starts them).
//
//	cachebench                 lists the benchmarks
//	cachebench <name> [flags]  runs one; `cachebench <name> -h` shows its flags
//
// Every benchmark prints the baseline it is compared with, measured in the same run. Each
// benchmark lives in its own file of this package and registers itself from init().
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// runFunc runs one benchmark with its command-line arguments (after the name) and prints
// its results on stdout.
type runFunc func(ctx context.Context, args []string) error

type benchmark struct {
	about string
	run   runFunc
}

var benchmarks = map[string]benchmark{}

// register adds a benchmark; call it from an init function.
func register(name, about string, run runFunc) {
	if _, dup := benchmarks[name]; dup {
		panic("cachebench: benchmark registered twice: " + name)
	}
	benchmarks[name] = benchmark{about: about, run: run}
}

func list() {
	fmt.Println("usage: cachebench <benchmark> [flags]\n\nbenchmarks:")
	names := make([]string, 0, len(benchmarks))
	for n := range benchmarks {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Printf("  %-28s %s\n", n, benchmarks[n].about)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "help" {
		list()
		return
	}
	b, ok := benchmarks[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "cachebench: unknown benchmark %q\n", os.Args[1])
		list()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.run(ctx, os.Args[2:]); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "cachebench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
