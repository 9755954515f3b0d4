// Command chaos runs statecast whole under random faults and checks that every cache equals
// PostgreSQL (package cmd/internal/chaos).
//
//	chaos [-duration 2m] [-changes 5000] [-seed N] [-faults N] [-clients 4] [-writers 3] [-kafka-nodes 1] [-race] [-dir DIR]
//	chaos client -config client.json   # one client process of a run (the run starts them)
//
// It prints its progress, every violation and a summary line, and exits 1 when it found a
// violation (the seed in the first line replays the same fault plan).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/statecast/statecast/cmd/internal/chaos"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "client" {
		os.Exit(client(os.Args[2:]))
	}
	var cfg chaos.Config
	flag.DurationVar(&cfg.Duration, "duration", 0, "how long the faults last, about (default 2m)")
	flag.Int64Var(&cfg.Changes, "changes", 0, "source row changes to make at least (default 5000)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault plan and the workload (default: from the clock)")
	flag.IntVar(&cfg.Faults, "faults", 0, "number of faults (default: one per 8s, at least 17)")
	flag.IntVar(&cfg.Clients, "clients", 0, "client processes (default 4)")
	flag.IntVar(&cfg.Writers, "writers", 0, "writers (default 3)")
	flag.IntVar(&cfg.KafkaNodes, "kafka-nodes", 0, "Kafka broker nodes (default 1; 3: a KRaft cluster, replication factor 3, min.insync.replicas=2, and the broker faults)")
	flag.BoolVar(&cfg.Race, "race", false, "build the processes with the race detector")
	flag.StringVar(&cfg.Dir, "dir", "", "keep the run's binaries, logs and state here (default: a temporary directory, kept when there are violations)")
	flag.Parse()
	cfg.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, cfg)
	if res != nil {
		for _, v := range res.Violations {
			fmt.Println("VIOLATION", v)
		}
		fmt.Println(res.Summary())
		if res.Dir != "" {
			fmt.Println("logs, configs and events in", res.Dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if len(res.Violations) > 0 {
		os.Exit(1)
	}
}

func client(args []string) int {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	path := fs.String("config", "client.json", "the client's configuration (chaos.ClientConfig as JSON)")
	_ = fs.Parse(args)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	b, err := os.ReadFile(*path)
	if err != nil {
		log.Error("config", "err", err)
		return 1
	}
	var cfg chaos.ClientConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		log.Error("config", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := chaos.RunClient(ctx, cfg, log); err != nil {
		log.Error("client failed", "err", err)
		return 1
	}
	return 0
}
