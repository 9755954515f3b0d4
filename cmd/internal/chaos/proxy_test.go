package chaos

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	s, err := r.ReadString('\n')
	return s, err
}

// TestProxyBlackholeAndReset: a black hole holds the bytes without closing (the peer times
// out waiting), Heal delivers them; Reset ends live connections with an RST, and the proxy
// forwards new ones.
func TestProxyBlackholeAndReset(t *testing.T) {
	p, err := newProxy("test", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if s, err := roundTrip(c, r, "a", 5*time.Second); err != nil || s != "a\n" {
		t.Fatalf("through the proxy: %q, %v", s, err)
	}
	p.Blackhole()
	if s, err := roundTrip(c, r, "b", 300*time.Millisecond); !errors.Is(err, syscall.ETIMEDOUT) && !isTimeout(err) {
		t.Fatalf("in the black hole: %q, %v; want a timeout", s, err)
	}
	// A new connection is accepted but nothing passes.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if _, err := roundTrip(c2, r2, "x", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new connection in the black hole: %v; want a timeout", err)
	}
	p.Heal()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "b\n" {
		t.Fatalf("after Heal, the held bytes: %q, %v", s, err)
	}
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	if s, err := r2.ReadString('\n'); err != nil || s != "x\n" {
		t.Fatalf("after Heal, the held connection: %q, %v", s, err)
	}
	if n := p.Reset(); n != 2 {
		t.Fatalf("Reset ended %d links, want 2", n)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after Reset: %v, want connection reset", err)
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if s, err := roundTrip(c3, bufio.NewReader(c3), "c", 5*time.Second); err != nil || s != "c\n" {
		t.Fatalf("a new connection after Reset: %q, %v", s, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestPlan: a plan holds every kind of fault on every class of target, and a seed draws
// the same plan again.
func TestPlan(t *testing.T) {
	topo := topology{players: []string{"player-1", "player-2"}, clients: []string{"client-0", "client-1"}, ackTimeout: 3 * time.Second}
	a := plan(42, time.Minute, 17, topo)
	if len(a) != 17 {
		t.Fatalf("%d faults, want 17", len(a))
	}
	seen := map[string]bool{}
	for _, f := range a {
		class := f.Target
		for _, p := range []string{"active", "standby", "player", "client", "pg/", "kafka/active", "kafka/standby", "kafka/player"} {
			if strings.HasPrefix(f.Target, p) {
				class = p
				break
			}
		}
		switch class {
		case "standby":
			class = "active"
		case "kafka/standby":
			class = "kafka/active"
		}
		seen[f.Kind+" "+class] = true
		if f.Kind == KindPause && f.Hold <= topo.ackTimeout {
			t.Errorf("%s: not longer than the ack timeout", f)
		}
	}
	if len(seen) != 17 {
		t.Errorf("%d distinct kinds and classes, want 17: %v", len(seen), seen)
	}
	b := plan(42, time.Minute, 17, topo)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("the same seed drew %v then %v", a[i], b[i])
		}
	}
	if c := plan(43, time.Minute, 17, topo); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Errorf("seeds 42 and 43 drew the same plan")
	}
	if n := len(plan(42, 10*time.Minute, 60, topo)); n != 60 {
		t.Errorf("%d faults, want 60", n)
	}
}
