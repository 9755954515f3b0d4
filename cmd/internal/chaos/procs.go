package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the run (a distributor, a player, a client), supervised like an
// orchestrator would: an exit the run did not cause is recorded (a crash) and the process
// is started again after a second, so the run goes on and the crash is reported at the end.
type proc struct {
	name string
	kind string // "distributor", "player", "client"
	bin  string
	args []string
	log  string // stdout and stderr, appended across restarts

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd ended
	expected bool          // the run is ending the current process (kill, stop)
	paused   bool
	down     bool // killed or stopped by the run, not started again yet
	starts   int
	crashes  []string
	// crashStarts are the start numbers (starts) of the crashed incarnations.
	crashStarts []int
	maxRSS      int64 // bytes, over every incarnation
	onCrash     func(p *proc, what string)
	stopping    bool // the run is over: no restart after a crash
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *proc) startLocked() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== chaos: start #%d of %s at %s\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	f.Close() // the child holds its own descriptor
	p.cmd, p.exited, p.expected, p.paused, p.down = cmd, make(chan struct{}), false, false, false
	go p.wait(cmd, p.exited)
	return nil
}

func (p *proc) wait(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	close(exited)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != cmd || p.expected {
		return
	}
	what := "exited"
	if err != nil {
		what = err.Error()
	}
	msg := fmt.Sprintf("%s (pid %d, start #%d) %s on its own; last log lines:\n%s", p.name, cmd.Process.Pid, p.starts, what,
		indent(tailFile(p.log, 12)))
	p.crashes = append(p.crashes, msg)
	p.crashStarts = append(p.crashStarts, p.starts)
	if p.onCrash != nil {
		p.onCrash(p, msg)
	}
	if p.stopping {
		return
	}
	go func() {
		time.Sleep(time.Second)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cmd == cmd && !p.stopping {
			_ = p.startLocked()
		}
	}()
}

// crashLooping says whether n of the last n+1 starts of the process ended in a crash (the
// one more: the start after the last crash may be running).
func (p *proc) crashLooping(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.crashStarts) >= n && p.crashStarts[len(p.crashStarts)-n] >= p.starts-n
}

// lastCrash describes the last crash.
func (p *proc) lastCrash() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.crashes) == 0 {
		return ""
	}
	return p.crashes[len(p.crashes)-1]
}

// pid of the current process (0 when none runs).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.down {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// kill ends the process with SIGKILL and waits for it (a crash the run caused).
func (p *proc) kill() { p.end(syscall.SIGKILL, 0) }

// stop ends the process with SIGTERM (SIGKILL after grace) and waits for it.
func (p *proc) stop(grace time.Duration) { p.end(syscall.SIGTERM, grace) }

func (p *proc) end(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil || p.down {
		p.mu.Unlock()
		return
	}
	p.expected, p.down = true, true
	if p.paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
	_ = cmd.Process.Signal(sig)
	p.mu.Unlock()
	if grace > 0 {
		select {
		case <-exited:
			return
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-exited
}

// restart starts the process again after kill or stop.
func (p *proc) restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return nil
	}
	return p.startLocked()
}

// pause stops the process (SIGSTOP): it keeps its sockets and answers nothing.
func (p *proc) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.down && !p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		p.paused = true
	}
}

// resume continues a paused process (SIGCONT).
func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// sampleRSS reads the current process's resident memory and keeps the maximum.
func (p *proc) sampleRSS() {
	pid := p.pid()
	if pid == 0 {
		return
	}
	rss := readRSS(pid)
	p.mu.Lock()
	p.maxRSS = max(p.maxRSS, rss)
	p.mu.Unlock()
}

// readRSS is VmRSS of /proc/pid/status in bytes (0 when unreadable).
func readRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// logProblems scans a process log for what the Go runtime writes when a process dies
// badly or the race detector finds a race.
func logProblems(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	ctx := 0
	for sc.Scan() {
		l := sc.Text()
		if ctx > 0 { // the lines after a hit: where it happened
			out[len(out)-1] += "\n    " + trunc(l, 300)
			ctx--
			continue
		}
		for _, pfx := range []string{"panic: ", "fatal error: ", "WARNING: DATA RACE", "SIGSEGV"} {
			if strings.HasPrefix(l, pfx) {
				out = append(out, trunc(l, 400))
				ctx = 8
				break
			}
		}
	}
	return out
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
