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

	"github.com/statecast/statecast/internal/probe"
	"github.com/statecast/statecast/internal/version"
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
//
// Two flags do something else and exit: -version prints the version; -probe URL checks a
// running instance (package probe: the health check command of an image without a shell),
// http(s) URLs and the schemes of the probes given here.
func Main(name string, run func(ctx context.Context, env Env) error, probes ...Probe) {
	path := flag.String("config", name+".yaml", "YAML configuration file")
	debug := flag.Bool("debug", false, "debug logging")
	showVersion := flag.Bool("version", false, "print the version and exit")
	probeURL := flag.String("probe", "", "check a running instance's endpoint (e.g. http://127.0.0.1:7071/healthz) and exit: 0 healthy, 1 not")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get().Line(name))
		return
	}
	if *probeURL != "" {
		more := map[string]probe.Func{}
		for _, p := range probes {
			more[p.Scheme] = p.Check
		}
		os.Exit(probe.Run(name, *probeURL, more))
	}
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

// Probe lets -probe check the URLs of Scheme with Check.
type Probe struct {
	Scheme string
	Check  probe.Func
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
