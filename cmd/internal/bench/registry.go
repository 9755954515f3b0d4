package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
)

// Benchmark is one `cachebench <name>` command.
type Benchmark struct {
	Name  string
	About string // one line for the list
	// Run registers its own flags on args, calls args.Parse and prints the results on w.
	Run func(ctx context.Context, args *Args, w io.Writer) error
}

// Main runs the benchmark named by args[0] with the rest of args, or lists the benchmarks
// when there is no name, "-h" or "help". A benchmark's usage (-h) and flag errors go to
// stderr; its profiles are written when it returns. Main returns the process exit code: 0,
// 1 when the benchmark failed (or its flags were wrong), 2 for an unknown name. The list holds unique names (checked: a
// duplicate is a programming error and panics).
func Main(ctx context.Context, prog string, list []Benchmark, args []string, stdout, stderr io.Writer) int {
	seen := map[string]bool{}
	for _, b := range list {
		if seen[b.Name] {
			panic(prog + ": benchmark listed twice: " + b.Name)
		}
		seen[b.Name] = true
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		printList(stdout, prog, list)
		return 0
	}
	i := slices.IndexFunc(list, func(b Benchmark) bool { return b.Name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "%s: unknown benchmark %q\n", prog, args[0])
		printList(stdout, prog, list)
		return 2
	}
	a := newArgs(list[i].Name, args[1:], stderr)
	err := list[i].Run(ctx, a, stdout)
	a.stopProfiles()
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, args[0], err)
		return 1
	}
}

// printList prints the usage line and the benchmarks sorted by name.
func printList(w io.Writer, prog string, list []Benchmark) {
	fmt.Fprintf(w, "usage: %s <benchmark> [flags]\n\nbenchmarks:\n", prog)
	sorted := slices.Clone(list)
	slices.SortFunc(sorted, func(a, b Benchmark) int { return cmp.Compare(a.Name, b.Name) })
	for _, b := range sorted {
		fmt.Fprintf(w, "  %-28s %s\n", b.Name, b.About)
	}
}

// Args is a benchmark's command line: a flag set named for the benchmark with the flags
// every benchmark has (-brokers, and -cpuprofile, -memprofile, -mutexprofile,
// -blockprofile and -trace), and the arguments.
type Args struct {
	*flag.FlagSet
	args    []string
	brokers *string
	prof    *profileFiles
	stop    func()
}

func newArgs(name string, args []string, stderr io.Writer) *Args {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &Args{FlagSet: fs, args: args, brokers: brokersFlag(fs), prof: profileFlags(fs)}
}

// Parse parses the arguments, checks -brokers and starts the requested profiles (written
// when the benchmark returns). After -h it returns flag.ErrHelp.
func (a *Args) Parse() (brokers []string, err error) {
	if err := a.FlagSet.Parse(a.args); err != nil {
		return nil, err
	}
	if brokers, err = splitBrokers(*a.brokers); err != nil {
		return nil, err
	}
	if a.stop, err = a.prof.Start(); err != nil {
		return nil, err
	}
	return brokers, nil
}

func (a *Args) stopProfiles() {
	if a.stop != nil {
		a.stop()
	}
}
