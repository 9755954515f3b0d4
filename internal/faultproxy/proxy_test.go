package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line until the test ends; each line it
// receives is also sent on got, when got is not nil.
func echoServer(t *testing.T, got chan<- string) string {
	t.Helper()
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
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if got != nil {
						got <- line
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T, target string, opts ...Option) *Proxy {
	t.Helper()
	p, err := New(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// client is one connection through a proxy.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// roundTrip sends msg as a line and reads a line back within d.
func (c *client) roundTrip(msg string, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	return c.read(d)
}

func (c *client) read(d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	return c.r.ReadString('\n')
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBlackholeAndReset: a black hole holds the bytes without closing (the peer times out
// waiting) and holds a new connection unanswered; Heal delivers what it held; Reset ends
// the live connections with an RST, and the proxy forwards new ones.
func TestBlackholeAndReset(t *testing.T) {
	p := start(t, echoServer(t, nil))
	c := dial(t, p)
	if s, err := c.roundTrip("a", 5*time.Second); err != nil || s != "a\n" {
		t.Fatalf("through the proxy: %q, %v", s, err)
	}
	p.Blackhole()
	if s, err := c.roundTrip("b", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("in the black hole: %q, %v; want a timeout", s, err)
	}
	c2 := dial(t, p)
	if _, err := c2.roundTrip("x", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new connection in the black hole: %v; want a timeout", err)
	}
	p.Heal()
	if s, err := c.read(5 * time.Second); err != nil || s != "b\n" {
		t.Fatalf("after Heal, the held bytes: %q, %v", s, err)
	}
	if s, err := c2.read(5 * time.Second); err != nil || s != "x\n" {
		t.Fatalf("after Heal, the held connection: %q, %v", s, err)
	}
	if n := p.Links(); n != 2 {
		t.Fatalf("Links: %d, want 2", n)
	}
	if n := p.Reset(); n != 2 {
		t.Fatalf("Reset ended %d links, want 2", n)
	}
	if _, err := c.read(5 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after Reset: %v, want connection reset", err)
	}
	c3 := dial(t, p)
	if s, err := c3.roundTrip("c", 5*time.Second); err != nil || s != "c\n" {
		t.Fatalf("a new connection after Reset: %q, %v", s, err)
	}
}

// TestCutRestore: Cut breaks live connections and refuses new ones; Restore forwards again.
func TestCutRestore(t *testing.T) {
	p := start(t, echoServer(t, nil))
	c := dial(t, p)
	if s, err := c.roundTrip("hello", 5*time.Second); err != nil || s != "hello\n" {
		t.Fatalf("before Cut: %q, %v", s, err)
	}
	p.Cut()
	if s, err := c.roundTrip("lost", 5*time.Second); err == nil {
		t.Fatalf("a live connection still works after Cut: %q", s)
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		cl := &client{c2, bufio.NewReader(c2)}
		s, err := cl.roundTrip("refused", 5*time.Second)
		c2.Close()
		if err == nil {
			t.Fatalf("a new connection works while cut: %q", s)
		}
	}
	p.Restore()
	c3 := dial(t, p)
	if s, err := c3.roundTrip("again", 5*time.Second); err != nil || s != "again\n" {
		t.Fatalf("after Restore: %q, %v", s, err)
	}
}

// TestHalfClose: a client that shuts down its writing side still reads the answer to what
// it sent, then the server's end.
func TestHalfClose(t *testing.T) {
	p := start(t, echoServer(t, nil))
	c := dial(t, p)
	if _, err := io.WriteString(c, "last\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(c.r)
	if err != nil || string(rest) != "last\n" {
		t.Fatalf("after the client's half-close: %q, %v; want the answer, then EOF", rest, err)
	}
}

// TestSetup: a Setup reads the client's first line and passes it on changed, as the
// link's preamble; a link that holds only ToClient is dialled and forwards what the
// client sends during a black hole, and holds only the answers; a Setup's error drops the
// connection.
func TestSetup(t *testing.T) {
	got := make(chan string, 16)
	p := start(t, echoServer(t, got), WithSetup(func(c net.Conn) (Link, error) {
		var b [6]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return Link{}, err
		}
		if string(b[:]) != "hello\n" {
			return Link{}, errors.New("not a hello")
		}
		return Link{Preamble: []byte("HELLO\n"), Hold: ToClient, ServerReadBuffer: 4 << 10}, nil
	}))
	expect := func(want string) {
		t.Helper()
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("the server received %q, want %q", s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the server did not receive %q", want)
		}
	}

	p.Blackhole()
	c := dial(t, p)
	if s, err := c.roundTrip("hello", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("the answer in the black hole: %q, %v; want a timeout", s, err)
	}
	expect("HELLO\n") // dialled during the hole, the preamble sent
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "up\n"); err != nil {
		t.Fatal(err)
	}
	expect("up\n")
	p.Heal()
	for _, want := range []string{"HELLO\n", "up\n"} {
		if s, err := c.read(5 * time.Second); err != nil || s != want {
			t.Fatalf("after Heal: %q, %v; want %q", s, err, want)
		}
	}

	bad := dial(t, p)
	_, err := bad.roundTrip("howdy", 5*time.Second)
	if err == nil || isTimeout(err) {
		t.Fatalf("a connection the Setup refused: %v; want it closed", err)
	}
}
