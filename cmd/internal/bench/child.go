package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/statecast/statecast/distributor"
)

// A benchmark that judges the distributor's memory runs it alone in a child process: the
// same executable started again with childEnv set, so that its resident memory is not the
// player's and the cacheclient's too. The child runs one distributor from the JSON of a
// distributor.Config, prints "ready <nanoseconds>" once it published its start-up epochs
// (Run → WaitReady), answers each "mem" line on its standard input with its memory since
// the previous one, and stops when its standard input closes.

const (
	childEnv     = "CACHEBENCH_CHILD_DISTRIBUTOR" // the config's JSON
	childCPUEnv  = "CACHEBENCH_CHILD_CPUPROFILE"
	childHeapEnv = "CACHEBENCH_CHILD_MEMPROFILE"
	childLogEnv  = "CACHEBENCH_CHILD_LOG" // "info" or "debug": the distributor's log on stderr
)

// ChildMain runs the child's side when this process is one (childEnv or childPlayerEnv
// set) and returns true; the caller then exits with code.
func ChildMain() (code int, isChild bool) {
	if js := os.Getenv(childPlayerEnv); js != "" {
		if err := runChildPlayer(js); err != nil {
			fmt.Fprintln(os.Stderr, "player child:", err)
			return 1, true
		}
		return 0, true
	}
	js := os.Getenv(childEnv)
	if js == "" {
		return 0, false
	}
	if err := runChild(js); err != nil {
		fmt.Fprintln(os.Stderr, "distributor child:", err)
		return 1, true
	}
	return 0, true
}

// childCPUProfile starts the CPU profile a child process was asked for (childCPUEnv);
// stop ends it.
func childCPUProfile() (stop func(), err error) {
	f := os.Getenv(childCPUEnv)
	if f == "" {
		return func() {}, nil
	}
	out, err := os.Create(f)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

func runChild(js string) error {
	var cfg distributor.Config
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return err
	}
	stop, err := childCPUProfile()
	if err != nil {
		return err
	}
	defer stop()
	var opts []distributor.Option
	if l := os.Getenv(childLogEnv); l != "" {
		level := slog.LevelInfo
		if l == "debug" {
			level = slog.LevelDebug
		}
		opts = append(opts, distributor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))))
	}
	d, err := distributor.New(cfg, opts...)
	if err != nil {
		return err
	}
	mem := newMemSampler()
	defer mem.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- d.Run(ctx) }()
	ready := make(chan error, 1)
	go func() { ready <- d.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			return err
		}
	case err := <-done:
		return fmt.Errorf("stopped before it was ready: %v", err)
	}
	fmt.Printf("ready %d\n", time.Since(start))
	return commands(done, cancel, func(l string) error {
		if l == "mem" {
			m := mem.take()
			b, _ := json.Marshal(m)
			fmt.Printf("mem %s\n", b)
		}
		return nil
	})
}

// commands runs a child's conversation with its parent: each line read from stdin is a
// command for handle, until stdin ends (the parent is done: the allocation profile is
// written when asked for, the component stopped through cancel and waited for) or the
// component stops by itself (done) or handle fails.
func commands(done <-chan error, cancel context.CancelFunc, handle func(cmd string) error) error {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("stopped: %v", err)
		case l, ok := <-lines:
			if !ok {
				if f := os.Getenv(childHeapEnv); f != "" {
					if out, err := os.Create(f); err == nil {
						_ = pprof.Lookup("allocs").WriteTo(out, 0)
						out.Close()
					}
				}
				cancel()
				<-done
				return nil
			}
			if err := handle(l); err != nil {
				return err
			}
		}
	}
}

// Mem is a process's memory over a phase of a benchmark.
type Mem struct {
	PeakRSS  int64 // VmHWM since the previous phase (reset through /proc/self/clear_refs)
	RSS      int64 // VmRSS at the end
	PeakHeap int64 // the highest Go heap (objects, live and not yet swept) sampled every 5 ms
	PeakLive int64 // the highest live heap the collector measured (at the end of a GC)
	Heap     int64 // the heap's objects at the end
	Live     int64 // the live heap at the end (after a forced GC): what the phase left held
}

// memSampler samples the Go heap of this process.
type memSampler struct {
	mu         sync.Mutex
	peak, live int64
	quit       chan struct{}
	wg         sync.WaitGroup
}

func newMemSampler() *memSampler {
	m := &memSampler{quit: make(chan struct{})}
	resetHWM()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case <-t.C:
				h, l := heapNow()
				m.mu.Lock()
				m.peak, m.live = max(m.peak, h), max(m.live, l)
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *memSampler) stop() { close(m.quit); m.wg.Wait() }

// take returns the memory since the previous take and starts a new phase.
func (m *memSampler) take() Mem {
	hwm, rss := procMem("self")
	h, l := heapNow()
	m.mu.Lock()
	out := Mem{PeakRSS: hwm, RSS: rss, PeakHeap: max(m.peak, h), PeakLive: max(m.live, l), Heap: h}
	m.mu.Unlock()
	runtime.GC() // the next phase's live peak starts from what is held now
	h, l = heapNow()
	out.Live = l
	m.mu.Lock()
	m.peak, m.live = h, l
	m.mu.Unlock()
	resetHWM()
	return out
}

func heapNow() (heap, live int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// stacksNow is the memory of this process's goroutine stacks (the heap's figures leave
// it out).
func stacksNow() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// resetHWM resets this process's peak resident set size (VmHWM).
func resetHWM() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procMem reads VmHWM and VmRSS of a process ("self" or a pid) in bytes.
func procMem(pid string) (hwm, rss int64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			hwm = n << 10
		case "VmRSS:":
			rss = n << 10
		}
	}
	return hwm, rss
}

// ChildDistributor is a distributor running in a child process.
type ChildDistributor struct {
	*childProc
	Ready time.Duration // Run → WaitReady, measured in the child
}

// childProc is this executable started again as a child (a benchmark's distributor or
// player): its standard input takes requests, its standard output's lines answer them.
type childProc struct {
	what  string // "distributor", "player": for errors
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// startChild starts this executable with env added to the environment.
func startChild(what string, env ...string) (*childProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr // its errors, and its log when asked
	c := &childProc{what: what, cmd: cmd, lines: make(chan string, 4)}
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// line waits for the child's next line that starts with prefix and returns the rest.
func (c *childProc) line(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("bench: the %s child exited (run with -log to see why)", c.what)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest, nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// ask sends the request req and returns the rest of the child's answer, the line that
// starts with req and a space.
func (c *childProc) ask(ctx context.Context, req string) (string, error) {
	if _, err := io.WriteString(c.in, req+"\n"); err != nil {
		return "", err
	}
	return c.line(ctx, req+" ")
}

// Stop stops the child (it writes its profiles first) and waits for it.
func (c *childProc) Stop() error {
	_ = c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		return fmt.Errorf("bench: the %s child did not stop within %v", c.what, stopTimeout)
	}
}

// ChildOptions are a child's environment: GOMEMLIMIT ("" for none), the profiles it
// writes when it stops ("" for none) and its log level ("", "info", "debug"; the log goes
// to stderr).
type ChildOptions struct {
	MemLimit   string
	Log        string
	CPUProfile string
	MemProfile string
}

// StartChildDistributor starts a distributor with cfg in a child process and returns once
// it is ready (its start-up epochs published).
func StartChildDistributor(ctx context.Context, cfg distributor.Config, o ChildOptions) (*ChildDistributor, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	env := []string{childEnv + "=" + string(js), childCPUEnv + "=" + o.CPUProfile, childHeapEnv + "=" + o.MemProfile, childLogEnv + "=" + o.Log}
	if o.MemLimit != "" {
		env = append(env, "GOMEMLIMIT="+o.MemLimit)
	}
	p, err := startChild("distributor", env...)
	if err != nil {
		return nil, err
	}
	c := &ChildDistributor{childProc: p}
	l, err := c.line(ctx, "ready ")
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	n, _ := strconv.ParseInt(l, 10, 64)
	c.Ready = time.Duration(n)
	return c, nil
}

// Mem returns the child's memory since the previous call (or its start).
func (c *ChildDistributor) Mem(ctx context.Context) (Mem, error) {
	l, err := c.ask(ctx, "mem")
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	return m, json.Unmarshal([]byte(l), &m)
}

// SelfMem is this process's VmHWM and VmRSS (the player and the cacheclient of a
// benchmark that runs the distributor in a child).
func SelfMem() (hwm, rss int64) { return procMem("self") }

// ResetSelfHWM starts a new peak of this process's resident memory.
func ResetSelfHWM() { resetHWM() }

// MiB formats bytes in MiB.
func MiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
