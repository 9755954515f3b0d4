package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Env is what Main hands a daemon's run function: its config file, a JSON logger on
// stderr and a registry with the Go and process collectors.
type Env struct {
	Config string
	Log    *slog.Logger
	Reg    *prometheus.Registry
}

// Main is the main of the daemon called name: it parses -config (default name.yaml) and
// -debug, and calls run with a context that SIGINT and SIGTERM cancel (a graceful stop).
// An error is logged and the process exits with status 1.
func Main(name string, run func(ctx context.Context, env Env) error) {
	path := flag.String("config", name+".yaml", "YAML configuration file")
	debug := flag.Bool("debug", false, "debug logging")
	flag.Parse()
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	env := Env{Config: *path, Log: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})), Reg: prometheus.NewRegistry()}
	env.Reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, env)
	stop()
	if err != nil {
		env.Log.Error(name+" failed", "err", err)
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// OnSignal calls fn, on a goroutine of its own, each time the process receives sig, until
// ctx ends.
func OnSignal(ctx context.Context, sig os.Signal, fn func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				fn()
			}
		}
	}()
}
