package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/statecast/statecast/internal/probe"
	"github.com/statecast/statecast/internal/version"
	"github.com/statecast/statecast/internal/version/versionprom"
)

// Env is what Main hands a daemon's run function: its name, config file, a JSON logger on
// stderr, a registry with the Go and process collectors and statecast_build_info, the
// binary's version, and whether -check asked for a check instead of a run.
type Env struct {
	Name    string
	Config  string
	Log     *slog.Logger
	Reg     *prometheus.Registry
	Version version.Info
	// Check: validate the config and reach what it names, print what was found on Out,
	// and return (nil: all good) instead of running.
	Check bool
	Out   io.Writer
}

// LogStart writes the start-up line: the version and a summary of the config (attributes
// under "config"; the caller passes nothing secret: no passwords, tokens or keys).
func (e Env) LogStart(config ...any) {
	attrs := append(e.Version.Attrs(), slog.Group("config", config...))
	e.Log.Info(e.Name+" starting", attrs...)
}

// Exit statuses of the commands: ExitUsage for a bad command line, ExitFailure for
// everything else that stops a command (a bad config file, an unreachable dependency, a
// failed check).
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// Main is the main of the daemon called name: it parses -config (default name.yaml),
// -debug and -check, and calls run with a context that SIGINT and SIGTERM cancel (a
// graceful stop: "<name> stopping" is logged with the signal, then "<name> stopped" with
// how long the stop took). run's error is logged once and the process exits with
// ExitFailure; a bad command line exits with ExitUsage. The logger writes JSON lines on
// stderr with readable durations (NewLogger).
//
// Two flags do something else and exit: -version prints the version; -probe URL checks a
// running instance (package probe: the health check command of an image without a shell),
// http(s) URLs and the schemes of the probes given here.
func Main(name string, run func(ctx context.Context, env Env) error, probes ...Probe) {
	path := flag.String("config", name+".yaml", "YAML configuration file")
	debug := flag.Bool("debug", false, "debug logging")
	check := flag.Bool("check", false, "validate the config file, reach what it names, print what was found and exit: 0 good, 1 not")
	showVersion := flag.Bool("version", false, "print the version and exit")
	probeURL := flag.String("probe", "", "check a running instance's endpoint (e.g. http://127.0.0.1:7071/readyz) and exit: 0 healthy, 1 not")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q\n", name, flag.Arg(0))
		flag.Usage()
		os.Exit(ExitUsage)
	}
	info := version.Get()
	if *showVersion {
		fmt.Println(info.Line(name))
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
	env := Env{Name: name, Config: *path, Reg: prometheus.NewRegistry(), Version: info, Check: *check, Out: os.Stdout,
		Log: NewLogger(os.Stderr, level)}
	env.Reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), versionprom.Collector(info))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runLogged(ctx, env, run)
	stop()
	if err != nil {
		// Once, on the log the operator already reads: the error's own text names the
		// package it came from.
		env.Log.Error(name+" stopped", "err", err)
		os.Exit(ExitFailure)
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
