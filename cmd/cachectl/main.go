// Command cachectl is statecast's operator tool.
//
//	cachectl dev  [-for 15s] [-step 1s] [-kafka embedded|env] [-grpc addr] [-http addr] [-snapshot] [-idle] [-v]
//	                                                                 the demo (make demo)
//	cachectl tail -topic T [-config distributor.yaml | -kafka-brokers a,b [-kafka-tls …]] [-from N] [-follow] [-idle]
//	                                                                 print a stream's records
//	cachectl get -players a,b -stream S -view V [-key K] [-wait-for LSN] [-o table|json] [-ca F] [-cert F -cert-key F] [-token-file F]
//	                                                                 read a view through a player
//	cachectl stats -player HOST:PORT [-o table|json] [-token-file F] [-ca F]
//	                                                                 a player's status (its admin address)
//	cachectl validate -config distributor.yaml [-connect] [-analyze] check a distributor config (-connect: against PostgreSQL)
//	cachectl version                                                  print the version (also -version)
//
// tail reaches Kafka as the kafka section of a distributor's or a player's config file says
// (-config), or by the Kafka flags, kafkaconn.Config's (RegisterFlags: TLS, SASL
// PLAIN/SCRAM, the password from a file or a variable), the brokers defaulting to
// $STATECAST_KAFKA_BROKERS. get and stats take TLS flags and a bearer token
// from -token-file or $STATECAST_TOKEN (never from the command line).
//
// Exit status: 0 success, 1 a failure (an unreachable server, a refused request, a check
// that found problems), 2 a bad command line (unknown command or flag, a missing required
// flag, a stray argument).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	// The image holds the binary alone: without a system certificate pool, TLS verifies
	// with these embedded roots.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/ctl"
	"github.com/statecast/statecast/internal/version"
	"github.com/statecast/statecast/kafkaconn"
)

const usage = `usage: cachectl <command> [flags]

commands:
  dev       the main job end to end: seed the demo database, run the distributor on an embedded
            Kafka, a player and the sportsbook service (cacheclient); change rows, show them arrive
  tail      print the records of a stream (source transactions marked, position records readable,
            idle ones counted)
  get       read a view (or one key) through a player, as a service's cache does, with the stream
            and source positions it reflects (-wait-for LSN: read your write)
  stats     print a player's status (streams, source position, targets, states, lag) from its admin address
  validate  check a distributor config file (fields, cron, keys, Kafka settings);
            -connect: check it against PostgreSQL (each view's SQL with LIMIT 0, key columns,
            types, wal_level, replica identities, publication, slot);
            -analyze: ask PostgreSQL how each wal view's tables map to its rows
  version   print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "dev":
		err = dev(ctx, os.Args[2:])
	case "tail":
		err = tail(ctx, os.Args[2:])
	case "get":
		err = get(ctx, os.Args[2:])
	case "stats":
		err = stats(ctx, os.Args[2:])
	case "validate":
		err = validate(ctx, os.Args[2:])
	case "version", "-version", "--version":
		fmt.Println(version.Get().Line("cachectl"))
		return
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "cachectl: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "cachectl %s: %v (cachectl %s -h lists the flags)\n", os.Args[1], ue.error, os.Args[1])
		os.Exit(2)
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "cachectl:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line: cachectl exits with 2 (a failure exits with 1).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// parse parses a command's flags; a stray argument is a usage error. (A bad flag exits
// with 2 in fs.Parse: flag.ExitOnError.)
func parse(fs *flag.FlagSet, args []string) error {
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// dev runs the demo: the cachectl-dev command beside this binary or on PATH, with the
// same arguments. The demo links an in-process Kafka broker, the distributor, the player
// and the example service; cachectl itself, the tool an operator runs against a real
// deployment, links none of them.
func dev(ctx context.Context, args []string) error {
	bin, err := devCommand()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A stop of cachectl is a graceful stop of the demo (it drops its replication slot).
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		os.Exit(exit.ExitCode()) // the demo has said why
	}
	return err
}

// devCommand finds cachectl-dev: beside cachectl's own binary first (make demo builds
// both into one folder), then on PATH.
func devCommand() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), devBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(devBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("dev runs the demo with the %s command, found neither beside cachectl nor on PATH: run make demo, or go run ./cmd/%s", devBinary, devBinary)
}

const devBinary = "cachectl-dev"

func tail(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tail", flag.ExitOnError)
	kafka := kafkaconn.Config{ClientID: "statecast-tail"}
	if b := os.Getenv("STATECAST_KAFKA_BROKERS"); b != "" {
		kafka.Brokers = strings.Split(b, ",")
	}
	kafka.RegisterFlags(fs, "kafka-")
	fs.Func("brokers", "the same as -kafka-brokers", func(v string) error { return fs.Set("kafka-brokers", v) })
	config := fs.String("config", "", "a distributor's or a player's config file (distributor.yaml, player.yaml): Kafka as its kafka section says (instead of the -kafka flags)")
	topic := fs.String("topic", "", "stream topic (required)")
	from := fs.Int64("from", sarama.OffsetOldest, "first offset (default: the oldest)")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted")
	maxValue := fs.Int("max-value", 0, "cut printed values to this many bytes (0: never)")
	idle := fs.Bool("idle", false, "print every position record (by default those that end no record are counted, not printed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *topic == "" {
		return usagef("tail needs -topic")
	}
	if *config != "" {
		// The file or the flags, not a mix: which of the two a setting came from would be
		// a guess.
		var flags []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "brokers" || strings.HasPrefix(f.Name, "kafka-") {
				flags = append(flags, "-"+f.Name)
			}
		})
		if slices.Contains(flags, "-brokers") { // it sets -kafka-brokers
			flags = slices.DeleteFunc(flags, func(f string) bool { return f == "-kafka-brokers" })
		}
		if len(flags) > 0 {
			return usagef("-config and %s both say how to reach Kafka: give one", strings.Join(flags, ", "))
		}
		var err error
		if kafka, err = ctl.KafkaFromConfig(*config); err != nil {
			return err
		}
		kafka.ClientID = "statecast-tail" // not the daemon's: tail is another client
	}
	if len(kafka.Brokers) == 0 {
		return usagef("tail needs the Kafka brokers: -config distributor.yaml (or player.yaml: its kafka section), -kafka-brokers host:port,… (or -brokers), or $STATECAST_KAFKA_BROKERS")
	}
	if err := kafka.Validate(); err != nil {
		if *config != "" {
			return fmt.Errorf("%s: kafka: %w", *config, err)
		}
		return usageError{err}
	}
	// Accepted but weak settings are said, as the daemons say them at start.
	for _, w := range kafka.Warnings() {
		fmt.Fprintln(os.Stderr, "cachectl tail: warning:", w)
	}
	p := &ctl.Printer{W: os.Stdout, MaxValue: *maxValue, Idle: *idle}
	err := ctl.Tail(ctx, ctl.TailOptions{Kafka: kafka, Topic: *topic, From: *from, Follow: *follow}, p.Print)
	return errors.Join(err, p.Flush())
}

func get(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	players := fs.String("players", "127.0.0.1:7070", "player gRPC addresses, comma-separated")
	stream := fs.String("stream", "", "stream name (required)")
	view := fs.String("view", "", "view name (required)")
	key := fs.String("key", "", "key text (composite keys: parts joined by |, see schemas/README.md); empty: every row")
	timeout := fs.Duration("timeout", time.Minute, "give up when the view is not complete by then")
	waitFor := fs.String("wait-for", "", "a source position (LSN, e.g. from SELECT pg_current_wal_insert_lsn() after a write): read once the view reflects it")
	service := fs.String("service", "cachectl", "service name given to the player")
	instance := fs.String("instance", "", "instance id given to the player (default: generated)")
	output := fs.String("o", ctl.OutputTable, "output: table (key, tab, value lines; one key: its value) or json")
	filter := fs.String("filter", "", "read only the rows that pass this CEL filter over the view's columns (e.g. 'tenant_id == \"t1\"')")
	shard := fs.String("shard", "", "read only shard I of N of the view's keys, written I/N (e.g. 2/16)")
	var auth ctl.Auth
	auth.AddFlags(fs, "the players")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *stream == "" || *view == "" {
		return usagef("get needs -stream and -view")
	}
	sel := cacheclient.Selection{Filter: *filter}
	if *shard != "" {
		if _, err := fmt.Sscanf(*shard, "%d/%d", &sel.ShardIndex, &sel.ShardCount); err != nil || sel.ShardCount == 0 || sel.ShardIndex >= sel.ShardCount {
			return usagef("-shard %q: want I/N with 0 <= I < N", *shard)
		}
	}
	if err := ctl.CheckOutput(*output); err != nil {
		return usageError{err}
	}
	tlsConfig, err := auth.TLSConfig()
	if err != nil {
		return err
	}
	token, err := auth.Token()
	if err != nil {
		return err
	}
	if token != "" && tlsConfig == nil {
		return usagef("a token is sent over TLS only: add -tls (and -ca)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return ctl.Get(ctx, os.Stdout, ctl.GetOptions{Players: strings.Split(*players, ","), Stream: *stream, View: *view, Key: *key, WaitFor: *waitFor,
		TLS: tlsConfig, Token: token, Service: *service, InstanceID: *instance, Output: *output, Selection: sel})
}

func stats(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("stats", flag.ExitOnError)
	addr := fs.String("player", "127.0.0.1:7072", "the player's admin address (its `admin.addr` setting)")
	output := fs.String("o", ctl.OutputTable, "output: table or json (the status as the player sends it)")
	var auth ctl.Auth
	auth.AddFlags(fs, "the player's admin endpoint")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := ctl.CheckOutput(*output); err != nil {
		return usageError{err}
	}
	tlsConfig, err := auth.TLSConfig()
	if err != nil {
		return err
	}
	token, err := auth.Token()
	if err != nil {
		return err
	}
	return ctl.Stats(ctx, os.Stdout, ctl.StatsOptions{Addr: *addr, TLS: tlsConfig, Token: token, Output: *output})
}

func validate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ExitOnError)
	path := fs.String("config", "distributor.yaml", "distributor config file")
	connect := fs.Bool("connect", false, "also check the config against PostgreSQL (postgres.dsn): each view's SQL run with LIMIT 0, key columns, types, wal_level, replica identities, publication, slot")
	analyze := fs.Bool("analyze", false, "also ask PostgreSQL (postgres.dsn) how each wal view's tables map to its rows")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *connect {
		if err := ctl.Connect(ctx, os.Stdout, *path); err != nil || !*analyze {
			return err
		}
	}
	if *analyze {
		return ctl.Analyze(ctx, os.Stdout, *path)
	}
	return ctl.Validate(os.Stdout, *path)
}
