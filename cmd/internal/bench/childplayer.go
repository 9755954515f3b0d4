package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
)

// A benchmark that judges the player's CPU and memory per target runs it alone in a child
// process, as the distributor's (child.go): the receivers, the producer and their garbage
// are then not the player's. The child serves one stream on a loopback port, prints
// "ready <address>" once it is ready, answers each "stat" line on its standard input with
// a PlayerStat, each "cpu" line with its CPU time, each "targets" line with its
// targets and each "delay" line with its delivery delay histogram (DelayHist), and stops
// when its standard input closes.

const (
	childPlayerEnv = "CACHEBENCH_CHILD_PLAYER"      // a childPlayerConfig's JSON
	childInuseEnv  = "CACHEBENCH_CHILD_HEAPPROFILE" // the heap in use, written at each stat
)

type childPlayerConfig struct {
	Brokers    []string
	Topic      string
	Budget     int64 // TargetBudgetBytes (0: the default)
	MaxTargets int   // MaxTargetsPerPrincipal (0: the default)
}

// PlayerStat is what a player child reports of itself.
type PlayerStat struct {
	CPU        time.Duration // user + system time since it started
	Live       int64         // the live heap after a forced GC
	Stacks     int64         // the goroutines' stacks, settled (outside the heap's figures)
	Goroutines int           // its goroutines
	Targets    int           // targets on its status page
	QueueBytes int64         // the bytes of their queues
}

func runChildPlayer(js string) error {
	var c childPlayerConfig
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		return err
	}
	stop, err := childCPUProfile()
	if err != nil {
		return err
	}
	defer stop()
	cfg := player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: c.Brokers},
		Streams: []player.StreamConfig{{Name: c.Topic, Views: []string{"*"}}}, TargetBudgetBytes: c.Budget,
		MaxTargetsPerPrincipal: c.MaxTargets} // the anonymous principal holds every target
	reg := prometheus.NewRegistry()
	p, err := player.New(cfg, player.WithRegisterer(reg))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = p.Serve(lis) }()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Minute)
	err = p.WaitReady(rctx)
	rcancel()
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", lis.Addr())
	return commands(done, cancel, func(l string) error {
		switch l {
		case "delay":
			h, err := delayHist(reg)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(h)
			fmt.Printf("delay %s\n", b)
		case "targets":
			fmt.Printf("targets %d\n", targetsOf(p))
		case "stat":
			b, _ := json.Marshal(playerStat(p))
			if f := os.Getenv(childInuseEnv); f != "" {
				if out, err := os.Create(f); err == nil {
					_ = pprof.Lookup("heap").WriteTo(out, 0)
					out.Close()
				}
				if out, err := os.Create(f + ".goroutines"); err == nil {
					_ = pprof.Lookup("goroutine").WriteTo(out, 1)
					out.Close()
				}
			}
			fmt.Printf("stat %s\n", b)
		case "cpu":
			fmt.Printf("cpu %d\n", cpuTime())
		}
		return nil
	})
}

// cpuTime is this process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func targetsOf(p *player.Player) int {
	n := 0
	for _, s := range p.Status().Streams {
		n += len(s.Targets)
	}
	return n
}

func playerStat(p *player.Player) PlayerStat {
	st := PlayerStat{CPU: cpuTime()}
	for _, s := range p.Status().Streams {
		for _, t := range s.Targets {
			st.Targets++
			st.QueueBytes += t.QueueBytes
		}
	}
	runtime.GC()
	_, st.Live = heapNow()
	// A collection halves at most once the stack of a goroutine that uses under a quarter
	// of it: stacks grown while a target was admitted settle over several collections, as
	// they do in a player that runs.
	st.Stacks = stacksNow()
	for range 10 {
		runtime.GC()
		s := stacksNow()
		if s >= st.Stacks {
			break
		}
		st.Stacks = s
	}
	st.Goroutines = runtime.NumGoroutine()
	return st
}

// ChildPlayer is a player running in a child process.
type ChildPlayer struct {
	*childProc
	Addr string // its gRPC address
}

// StartChildPlayer starts a player (with CACHEBENCH_CHILD_CPUPROFILE or
// CACHEBENCH_CHILD_MEMPROFILE set, it writes its CPU or allocation profile there when it
// stops; with CACHEBENCH_CHILD_HEAPPROFILE, its heap in use at each Stat) of topic (every
// view, plaintext, without authentication: every target is the anonymous principal's, up
// to maxTargets; budget: its target_budget_bytes; 0 for the defaults) in a child process
// and returns once it is ready.
func StartChildPlayer(ctx context.Context, brokers []string, topic string, budget int64, maxTargets int) (*ChildPlayer, error) {
	js, err := json.Marshal(childPlayerConfig{Brokers: brokers, Topic: topic, Budget: budget, MaxTargets: maxTargets})
	if err != nil {
		return nil, err
	}
	p, err := startChild("player", childPlayerEnv+"="+string(js))
	if err != nil {
		return nil, err
	}
	c := &ChildPlayer{childProc: p}
	if c.Addr, err = c.line(ctx, "ready "); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// Stat asks the child for its CPU time, live heap and targets (after a collection).
func (c *ChildPlayer) Stat(ctx context.Context) (PlayerStat, error) {
	l, err := c.ask(ctx, "stat")
	if err != nil {
		return PlayerStat{}, err
	}
	var st PlayerStat
	return st, json.Unmarshal([]byte(l), &st)
}

// CPU is the child's user and system time so far (no collection first, unlike Stat).
func (c *ChildPlayer) CPU(ctx context.Context) (time.Duration, error) {
	l, err := c.ask(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(l, 10, 64)
	return time.Duration(n), err
}

// Delay reads the child's delivery delay histogram (no collection).
func (c *ChildPlayer) Delay(ctx context.Context) (DelayHist, error) {
	l, err := c.ask(ctx, "delay")
	if err != nil {
		return DelayHist{}, err
	}
	var h DelayHist
	return h, json.Unmarshal([]byte(l), &h)
}

// Targets is how many targets the child has (no collection, unlike Stat).
func (c *ChildPlayer) Targets(ctx context.Context) (int, error) {
	l, err := c.ask(ctx, "targets")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(l)
}
