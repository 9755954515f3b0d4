package testenv_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// echoServer accepts connections and echoes lines until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
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

func roundTrip(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestProxyCutRestore: Cut breaks live connections and refuses new ones; Restore forwards again.
func TestProxyCutRestore(t *testing.T) {
	p := testenv.NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("before cut: %q, %v", got, err)
	}
	p.Cut()
	if got, err := roundTrip(c, "lost"); err == nil {
		t.Fatalf("live connection still works after Cut: %q", got)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		got, err := roundTrip(c2, "refused")
		c2.Close()
		if err == nil {
			t.Fatalf("new connection works while cut: %q", got)
		}
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "again"); err != nil || got != "again\n" {
		t.Fatalf("after restore: %q, %v", got, err)
	}
}
