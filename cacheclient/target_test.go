package cacheclient

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// startTargetClient starts a client whose only Addresses entry is a target URI that r
// resolves, as dns:///player-headless:7070 resolves to a headless Service's players.
func startTargetClient(t *testing.T, r *manual.Resolver, connects *[]string, mu *sync.Mutex) (*Client, *View[event]) {
	t.Helper()
	c, err := New(Config{Addresses: []string{r.Scheme() + ":///players"}, Stream: "s", Service: "t",
		BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond},
		WithDialOptions(grpc.WithResolvers(r)),
		WithHooks(Hooks{OnConnect: func(addr string, _ bool) { mu.Lock(); *connects = append(*connects, addr); mu.Unlock() }}))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Register(c, "events", decodeEvent)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, v
}

func addrs(fps ...*fakePlayer) resolver.State {
	var s resolver.State
	for _, fp := range fps {
		s.Addresses = append(s.Addresses, resolver.Address{Addr: fp.addr})
	}
	return s
}

// TestTargetFollowsResolver: a client given a target URI follows the resolver's answer
// while it is connected. Player a is the only answer; the answer changes to b, then a ends
// the stream: the client resumes on b (never on a, gone from the answer) exactly after
// what it applied; the answer changes to c, b ends the stream: it resumes on c.
func TestTargetFollowsResolver(t *testing.T) {
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	player := func(name string, resume int64, entries ...*statecastv1.Entry) script {
		return func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if conn > 0 {
				return errors.New(name + ": a second stream")
			}
			if resume < 0 {
				if h.ResumeIndex != nil {
					return errors.New(name + ": want no resume index")
				}
				if err := s.snapshot(5, entries[0]); err != nil {
					return err
				}
				entries = entries[1:]
			} else if h.ResumeIndex == nil || *h.ResumeIndex != resume {
				return errors.New(name + ": wrong resume index")
			}
			if err := s.batch(entries...); err != nil {
				return err
			}
			if err := s.waitAck(entries[len(entries)-1].Index); err != nil {
				return err
			}
			if ch := release[name]; ch != nil {
				<-ch
				return errors.New(name + " is going away")
			}
			return nil
		}
	}
	a := startFake(t, player("a", -1, ent(1, "1", evJSON(1, "a")), ent(6, "2", evJSON(2, "a"))))
	b := startFake(t, player("b", 6, ent(9, "3", evJSON(3, "a"))))
	c := startFake(t, player("c", 9, ent(12, "4", evJSON(4, "a"))))

	r := manual.NewBuilderWithScheme("statecasttest")
	r.InitialState(addrs(a))
	var mu sync.Mutex
	var connects []string
	cl, v := startTargetClient(t, r, &connects, &mu)
	a.waitFor(t, "ack 6 on a", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 6 })
	waitReady(t, cl)

	r.UpdateState(addrs(b))
	close(release["a"])
	b.waitFor(t, "ack 9 on b", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 9 })

	r.UpdateState(addrs(c))
	close(release["b"])
	c.waitFor(t, "ack 12 on c", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 12 })

	eventually(t, "4 rows", func() bool { return v.Len() == 4 })
	for _, fp := range []*fakePlayer{a, b, c} {
		fp.mu.Lock()
		n := len(fp.hellos)
		fp.mu.Unlock()
		if n != 1 {
			t.Errorf("player %s got %d streams, want 1", fp.addr, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{a.addr, b.addr, c.addr}
	if len(connects) != len(want) {
		t.Fatalf("connects %q, want one to each of %q", connects, want)
	}
	for i, addr := range connects {
		if addr != "statecasttest:///players ("+want[i]+")" {
			t.Errorf("connect %d: %q, want the target and the player %s", i, addr, want[i])
		}
	}
}

// TestTargetFailsOverAcrossResolved: the resolver answers two players; when the one the
// client streams from stops, the client resumes on the other.
func TestTargetFailsOverAcrossResolved(t *testing.T) {
	var first sync.Once
	firstAddr := make(chan string, 1)
	serve := func(self **fakePlayer) script {
		return func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if h.ResumeIndex == nil {
				first.Do(func() { firstAddr <- (*self).addr })
				if err := s.snapshot(5, ent(1, "1", evJSON(1, "a"))); err != nil {
					return err
				}
				return s.batch(ent(6, "2", evJSON(2, "a")))
			}
			if *h.ResumeIndex != 6 {
				return errors.New("want resume 6")
			}
			return s.batch(ent(9, "3", evJSON(3, "a")))
		}
	}
	var a, b *fakePlayer
	a = startFake(t, serve(&a))
	b = startFake(t, serve(&b))
	r := manual.NewBuilderWithScheme("statecasttest")
	r.InitialState(addrs(a, b))
	var mu sync.Mutex
	var connects []string
	cl, v := startTargetClient(t, r, &connects, &mu)
	waitReady(t, cl)
	eventually(t, "2 rows", func() bool { return v.Len() == 2 })
	down, other := a, b
	if <-firstAddr == b.addr {
		down, other = b, a
	}
	down.waitFor(t, "ack 6", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 6 })
	down.srv.Stop()
	other.waitFor(t, "ack 9 after the failover", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 9 })
	eventually(t, "3 rows", func() bool { return v.Len() == 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(connects) != 2 || !strings.HasSuffix(connects[1], "("+other.addr+")") {
		t.Fatalf("connects %q: want the second to %s", connects, other.addr)
	}
}

func TestTargetConfig(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"dns:///player-headless:7070", true},
		{"dns://10.0.0.10:53/players.statecast.svc:7070", true},
		{"127.0.0.1:7070", true},
		{"dns:///", false},
		{"players", false},
	} {
		c := Config{Addresses: []string{tc.addr}, Stream: "s", Service: "t"}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%q: validate = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

// TestTargetRotatesAwayFromFailingPlayer: the resolver answers two players that both
// accept connections, but the one the client reaches first fails every stream; the client
// reaches the other (round_robin: each new stream goes to the next player), where
// pick_first would retry the first one forever.
func TestTargetRotatesAwayFromFailingPlayer(t *testing.T) {
	var mu sync.Mutex
	bad := ""
	serve := func(self **fakePlayer) script {
		return func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			mu.Lock()
			if bad == "" {
				bad = (*self).addr
			}
			isBad := bad == (*self).addr
			mu.Unlock()
			if isBad {
				return errors.New("this player's stream is broken")
			}
			return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
		}
	}
	var a, b *fakePlayer
	a = startFake(t, serve(&a))
	b = startFake(t, serve(&b))
	r := manual.NewBuilderWithScheme("statecasttest")
	r.InitialState(addrs(a, b))
	var cmu sync.Mutex
	var connects []string
	cl, v := startTargetClient(t, r, &connects, &cmu)
	waitReady(t, cl)
	if v.Len() != 1 {
		t.Fatalf("len %d", v.Len())
	}
}
