package cacheclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// refuse is a script that refuses every subscription with code and msg (the player's
// status, as toStatus writes it).
func refuse(code codes.Code, msg string) script {
	return func(int, *statecastv1.Hello, *fakeStream) error { return status.Error(code, msg) }
}

// hellos is the number of subscriptions fp received.
func (fp *fakePlayer) helloCount() int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return len(fp.hellos)
}

// TestRefusalThatCannotHealStops: a refusal that retrying with the same config cannot heal
// stops the client at its first answer: WaitReady returns it at once (no backoff, no
// second Hello) with its kind, the player's message and the address; WaitFor, Err, Run
// and Stats say the same, until Close.
func TestRefusalThatCannotHealStops(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		msg  string
		kind error
	}{
		{"unknown view", codes.NotFound, `player: unknown view: "selection" is not a view of stream "s" (a misspelt name, or a view not published yet)`, ErrUnknownView},
		{"unknown stream, the only address", codes.NotFound, `player: unknown stream: "s"`, ErrUnknownStream},
		{"permission denied", codes.PermissionDenied, `player: permission denied: principal "svc" may not read view "events" of stream "s"`, ErrPermissionDenied},
		{"bad hello", codes.InvalidArgument, `player: bad hello: 3 views, at most 2 (max_hello_views)`, ErrBadHello},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fp := startMemFake(t, refuse(tt.code, tt.msg))
				start := time.Now()
				c, _ := startClient(t, Config{BackoffMin: time.Second, BackoffMax: time.Minute}, nil, fp)
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				err := c.WaitReady(ctx)
				if !errors.Is(err, tt.kind) || !errors.Is(err, ErrStopped) || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("WaitReady = %v, want %v and ErrStopped", err, tt.kind)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("WaitReady returned after %v: the refusal was retried", d)
				}
				var se *SubscribeError
				if !errors.As(err, &se) || se.Addr != fp.addr || se.Code != tt.code || se.Message != tt.msg || !se.Permanent || status.Code(err) != tt.code {
					t.Fatalf("WaitReady = %#v (code %v), want a permanent SubscribeError from %s with the player's message", se, status.Code(err), fp.addr)
				}
				if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), fp.addr) {
					t.Errorf("the message %q does not say what the player said, and which player", err)
				}
				if err := c.WaitFor(ctx, 1); !errors.Is(err, tt.kind) || !errors.Is(err, ErrStopped) {
					t.Errorf("WaitFor = %v, want the refusal", err)
				}
				if !errors.Is(c.Err(), tt.kind) {
					t.Errorf("Err = %v", c.Err())
				}
				st := c.Stats()
				if !st.Stopped || st.Ready || !strings.Contains(st.LastError, tt.msg) {
					t.Errorf("Stats: stopped %v, ready %v, last error %q", st.Stopped, st.Ready, st.LastError)
				}
				time.Sleep(time.Hour) // a client that still retried would send another Hello by now
				if n := fp.helloCount(); n != 1 {
					t.Errorf("%d subscriptions, want 1: a stopped client stays stopped", n)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if err := c.WaitReady(ctx); !errors.Is(err, tt.kind) {
					t.Errorf("WaitReady after Close = %v, want the refusal still", err)
				}
			})
		})
	}
}

// TestRunReturnsTheRefusal: Run ends when the client stops, with the refusal.
func TestRunReturnsTheRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := startMemFake(t, refuse(codes.NotFound, `player: unknown view: "evnts" is not a view of stream "s"`))
		c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t"}, memDialer())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Register(c, "evnts", decodeEvent); err != nil {
			t.Fatal(err)
		}
		if err := c.Run(context.Background()); !errors.Is(err, ErrUnknownView) {
			t.Fatalf("Run = %v, want ErrUnknownView", err)
		}
	})
}

// TestRetriedRefusalNamedOnTimeout: a refusal or connection error that may heal is
// retried, and a WaitReady or WaitFor whose ctx ends names it: the error matches ctx's
// error and the cause's kind.
func TestRetriedRefusalNamedOnTimeout(t *testing.T) {
	tests := []struct {
		name string
		sc   script // nil: nothing listens at the address
		code codes.Code
		kind error
	}{
		{"unavailable", refuse(codes.Unavailable, "player: stream unavailable: kafka: client has run out of available brokers"), codes.Unavailable, ErrUnavailable},
		{"nothing listens", nil, codes.Unavailable, ErrUnavailable},
		{"unauthenticated", refuse(codes.Unauthenticated, "player: unauthenticated: unknown token"), codes.Unauthenticated, ErrUnauthenticated},
		{"protocol version", refuse(codes.FailedPrecondition, "player: client protocol version newer than the player's: upgrade the players"), codes.FailedPrecondition, ErrIncompatible},
		{"internal", refuse(codes.Internal, "something broke"), codes.Internal, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c *Client
				var fp *fakePlayer
				if tt.sc != nil {
					fp = startMemFake(t, tt.sc)
					c, _ = startClient(t, Config{}, nil, fp)
				} else {
					c = startClientAt(t, "127.0.0.77:1") // no fake there: memDialer fails to dial
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				err := c.WaitReady(ctx)
				var we *WaitError
				if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.Op != "WaitReady" {
					t.Fatalf("WaitReady = %v, want a WaitError of ctx's deadline", err)
				}
				var se *SubscribeError
				if !errors.As(err, &se) || se.Code != tt.code || se.Permanent || (tt.kind != nil && !errors.Is(err, tt.kind)) {
					t.Fatalf("WaitReady = %v (%#v), want the cause %v of code %v", err, se, tt.kind, tt.code)
				}
				if errors.Is(err, ErrStopped) || c.Err() != nil || c.Stats().Stopped {
					t.Fatalf("a refusal that may heal stopped the client: %v", c.Err())
				}
				if err := c.WaitFor(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &se) || se.Code != tt.code {
					t.Errorf("WaitFor = %v, want ctx's error and the cause", err)
				}
				if fp != nil && fp.helloCount() < 2 {
					t.Errorf("%d subscriptions: the refusal was not retried", fp.helloCount())
				}
			})
		})
	}
}

// startClientAt starts a client of the in-memory fakes with an "events" view on addrs.
func startClientAt(t *testing.T, addrs ...string) *Client {
	t.Helper()
	c, err := New(Config{Addresses: addrs, Stream: "s", Service: "t", BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond}, memDialer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Register(c, "events", decodeEvent); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestUnknownStreamStopsOnceEveryAddressRefused: a player that does not serve the stream
// sends the client to the next address; the client stops only when every address refused
// the stream in its latest attempt.
func TestUnknownStreamStopsOnceEveryAddressRefused(t *testing.T) {
	unknown := refuse(codes.NotFound, `player: unknown stream: "s"`)
	t.Run("another player serves it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := startMemFake(t, unknown)
			b := startMemFake(t, func(_ int, _ *statecastv1.Hello, s *fakeStream) error {
				return s.snapshot(3, ent(1, "1", evJSON(1, "a")))
			})
			c := startClientAt(t, a.addr, b.addr)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.WaitReady(ctx); err != nil {
				t.Fatalf("WaitReady = %v, want the second player's snapshot", err)
			}
			if a.helloCount() != 1 || c.Err() != nil {
				t.Fatalf("%d subscriptions to the first player, Err %v", a.helloCount(), c.Err())
			}
		})
	})
	t.Run("another player is down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := startMemFake(t, unknown)
			c := startClientAt(t, a.addr, "127.0.0.77:1") // nothing there: it may be restarting
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := c.WaitReady(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || c.Err() != nil || a.helloCount() < 2 {
				t.Fatalf("WaitReady = %v, Err %v, %d subscriptions: want retries until a player answers", err, c.Err(), a.helloCount())
			}
			if !errors.Is(err, ErrUnknownStream) && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("WaitReady = %v, want the last cause named", err)
			}
		})
	})
	t.Run("every player refuses it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := startMemFake(t, unknown), startMemFake(t, unknown)
			c := startClientAt(t, a.addr, b.addr)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := c.WaitReady(ctx)
			if !errors.Is(err, ErrUnknownStream) || !errors.Is(err, ErrStopped) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitReady = %v, want the client stopped on ErrUnknownStream", err)
			}
			if a.helloCount() != 1 || b.helloCount() != 1 {
				t.Fatalf("subscriptions %d and %d, want one to each", a.helloCount(), b.helloCount())
			}
		})
	})
}

// TestWaitErrorCauseIsCurrent: the cause of a wait that timed out is what ended the last
// stream only while no player serves: once a stream receives frames it is cleared, so a
// wait that is only too short (a snapshot still arriving) blames nothing stale.
func TestWaitErrorCauseIsCurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := startMemFake(t, func(conn int, _ *statecastv1.Hello, s *fakeStream) error {
			if conn == 0 {
				return status.Error(codes.Unavailable, "player: closed")
			}
			// A snapshot that begins and does not end (yet).
			return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 9}}})
		})
		c := startClientAt(t, fp.addr)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := c.WaitReady(ctx)
		var we *WaitError
		if !errors.As(err, &we) || we.Cause != nil || !we.Connected || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitReady = %v (%+v), want ctx's error without a cause, connected", err, we)
		}
		if st := c.Stats(); !strings.Contains(st.LastError, "player: closed") {
			t.Fatalf("Stats.LastError = %q, want the history kept", st.LastError)
		}
	})
}
