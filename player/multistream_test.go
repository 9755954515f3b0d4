package player

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// TestTwoStreams: one player serves two topics as two streams; each target gets exactly
// its stream's records (one delivery checker per topic).
func TestTwoStreams(t *testing.T) {
	e1 := newEnv(t, nil)
	e2 := &env{t: t, brokers: e1.brokers, topic: testenv.NewTopic(t, "player", map[string]string{"cleanup.policy": "compact"}), prod: e1.prod, chk: nopChecker(), last: -1}
	e1.produce(100, []string{"a", "b"}, 50, newRand(51))
	e2.produce(150, []string{"a", "c"}, 50, newRand(52))
	tp := startPlayer(t, e1, func(c *Config) {
		c.Streams = []StreamConfig{{Name: "s", Topic: e1.topic}, {Name: "s2", Topic: e2.topic}}
	})
	c1, c2 := newClient("one", e1.chk, "a"), newClient("two", e2.chk)
	c2.stream = "s2"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range []*client{c1, c2} {
		wg.Add(1)
		go func() { defer wg.Done(); runClient(ctx, t, c, func() string { return tp.addr }, true, 3) }()
	}
	e1.produce(200, []string{"a", "b"}, 50, newRand(53))
	e2.produce(200, []string{"a", "c"}, 50, newRand(54))
	waitFor(t, 60*time.Second, "both streams delivered", func() bool {
		return c1.Applied() >= e1.lastOffset() && c2.Applied() >= e2.lastOffset()
	})
	cancel()
	wg.Wait()
	e1.check()
	e2.check()
}
