package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/player"
)

// TestRefusalsOfTheRealPlayer: the player's refusals reach the service as errors of
// WaitReady that say what is wrong and match cacheclient's kinds (cacheclient tells the
// player's NotFound and InvalidArgument sentinels apart by their message: this holds the
// two together). A refusal that cannot heal ends WaitReady at once, not at its timeout.
func TestRefusalsOfTheRealPlayer(t *testing.T) {
	e := newKafkaEnv(t)
	e.put("events", [2]string{"1", ev(1, "tennis")})
	e.put("markets", [2]string{"1", ev(1, "tennis")})
	addr, _ := startPlayerWith(t, e, func(c *player.Config) {
		c.MaxHelloViews = 2
		c.Access = []player.Grant{{Principals: []string{"pricing"}, Streams: []string{"*"}, Views: []string{"*"}}}
	})
	open, _ := startPlayer(t, e)
	tests := []struct {
		name   string
		addr   string
		stream string
		views  []string
		kind   error
		says   string
	}{
		{"misspelt view", open, "s", []string{"events", "evnts"}, cacheclient.ErrUnknownView, `"evnts" is not a view of stream "s"`},
		{"misspelt stream", open, "ss", []string{"events"}, cacheclient.ErrUnknownStream, `unknown stream: "ss"`},
		{"too many views", addr, "s", []string{"events", "markets", "more"}, cacheclient.ErrBadHello, "max_hello_views"},
		{"no grant", addr, "s", []string{"events"}, cacheclient.ErrPermissionDenied, `may not read stream "s"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := cacheclient.New(cacheclient.Config{Addresses: []string{tt.addr}, Stream: tt.stream, Service: "refused",
				BackoffMin: time.Second, BackoffMax: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.views {
				if _, err := cacheclient.Register(c, v, decodeEvent); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err = c.WaitReady(ctx)
			if !errors.Is(err, tt.kind) || !errors.Is(err, cacheclient.ErrStopped) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("WaitReady = %v, want %v saying %q", err, tt.kind, tt.says)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("WaitReady took %v: the refusal was not final", d)
			}
			if st := c.Stats(); !st.Stopped || !strings.Contains(st.LastError, tt.says) {
				t.Errorf("Stats: stopped %v, last error %q", st.Stopped, st.LastError)
			}
		})
	}
}

// TestPlayerGoneNamedOnTimeout: with no player to answer, WaitReady's timeout says why.
func TestPlayerGoneNamedOnTimeout(t *testing.T) {
	e := newKafkaEnv(t)
	e.put("events", [2]string{"1", ev(1, "tennis")})
	addr, stop := startPlayer(t, e)
	stop()
	c, _ := newClient(t, []string{addr}, "", cacheclient.Hooks{})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := c.WaitReady(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, cacheclient.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("WaitReady = %v, want the deadline and the unreachable player %s", err, addr)
	}
}
