package player

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// childPlayer starts the test binary as a player process serving e's topic.
func childPlayer(t *testing.T, e *env) (addr string, kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+e.topic)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child player: %v", err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // SIGKILL: no graceful shutdown
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	return line[:len(line)-1], kill
}

// TestKill9: the player process is killed with SIGKILL (no shutdown) three times while
// targets are connected and records are produced; each time a new process starts and
// the targets resume from their applied index.
func TestKill9(t *testing.T) {
	e := newEnv(t, nil)
	rnd := newRand(21)
	e.produce(200, []string{"a", "b"}, 100, rnd)
	addr, kill := childPlayer(t, e)
	var cur atomic.Value
	cur.Store(addr)
	clients := []*client{newClient("all", e.chk), newClient("a", e.chk, "a"), newClient("b", e.chk, "b")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, t, c, func() string { return cur.Load().(string) }, false, uint64(i))
		}()
	}
	for range 3 {
		for range 10 {
			e.produce(30, []string{"a", "b"}, 100, rnd)
			time.Sleep(10 * time.Millisecond) // pacing
		}
		kill()
		addr, kill = childPlayer(t, e)
		cur.Store(addr)
	}
	e.produce(100, []string{"a", "b"}, 100, rnd)
	last := e.lastOffset()
	for _, c := range clients {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	e.check()
}
