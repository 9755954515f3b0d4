package player

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// dialSmallWindows connects with 64 KiB flow-control windows (no dynamic growth), so that
// a subscription that stops reading blocks the player's sends after a few frames.
func dialSmallWindows(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// subscribeAll sends a Hello for every view of stream "s" without a resume index.
func subscribeAll(ctx context.Context, t *testing.T, conn *grpc.ClientConn, id string) statecastv1.Player_SubscribeClient {
	t.Helper()
	st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{ClientId: id, Stream: "s"}}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// drain reads until the stream ends and returns how it ended.
func drain(st statecastv1.Player_SubscribeClient) error {
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}

// bigSnapshot fills the stream with ~3 MB of distinct rows: a snapshot of it cannot pass
// 64 KiB windows unread.
func bigSnapshot(e *env) {
	e.produce(600, []string{"a", "b", "c", "d"}, 16<<10, newRand(3))
}

// TestHelloBounds: a Hello naming more views than max_hello_views is refused before
// anything is looked up (InvalidArgument), and one larger than max_hello_bytes is refused
// by the transport (ResourceExhausted); a Hello within both is served.
func TestHelloBounds(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(20, []string{"a", "b", "c", "d"}, 10, newRand(1))
	tp := startPlayer(t, e, func(c *Config) { c.MaxHelloViews = 4; c.MaxHelloBytes = 1 << 10 })
	conn, err := grpc.NewClient(tp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name  string
		views []string
		want  codes.Code
	}{
		{"too many views", []string{"a", "b", "c", "d", "a"}, codes.InvalidArgument},
		{"too many bytes", []string{"a" + strings.Repeat("x", 2<<10)}, codes.ResourceExhausted},
		{"within the bounds", []string{"a", "b", "c", "d"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(hello("s", nil, tc.views...)); err != nil {
				t.Fatal(err)
			}
			_, err = st.Recv()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("first receive: %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestStreamsPerConnBounded: one connection gets at most max_streams_per_conn concurrent
// subscriptions; the next waits for one of them to end.
func TestStreamsPerConnBounded(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(20, []string{"a"}, 10, newRand(1))
	tp := startPlayer(t, e, func(c *Config) { c.MaxStreamsPerConn = 2 })
	conn := dialSmallWindows(t, tp.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	for i, c := range []context.Context{first, ctx} {
		if _, err := subscribeAll(c, t, conn, "c"+string(rune('0'+i))).Recv(); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	third, cancelThird := context.WithTimeout(ctx, 2*time.Second)
	defer cancelThird()
	st, err := statecastv1.NewPlayerClient(conn).Subscribe(third)
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third stream on the connection: %v, want it to wait (DeadlineExceeded)", err)
	}
	cancelFirst()
	if _, err := subscribeAll(ctx, t, conn, "c2").Recv(); err != nil {
		t.Fatalf("a stream after one ended: %v", err)
	}
}

// TestStalledSnapshotTimesOut: a client that stops reading in the middle of its snapshot
// (whose frames are never acknowledged) is suspended after the ack time-out like one that
// does not acknowledge batches, and its snapshot stops pinning rows.
func TestStalledSnapshotTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	bigSnapshot(e)
	tp := startPlayer(t, e, func(c *Config) { c.AckTimeout = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := subscribeAll(ctx, t, dialSmallWindows(t, tp.addr), "stalled")
	m, err := st.Recv()
	if err != nil || m.GetSnapshotBegin() == nil {
		t.Fatalf("first frame %v, %v; want SnapshotBegin", m, err)
	}
	// Stop reading: the player's sends block on flow control.
	waitFor(t, 30*time.Second, "the stalled target suspended", func() bool {
		return targetStatus(tp.p, "stalled").State == "absent"
	})
	waitFor(t, 30*time.Second, "the snapshot's rows released", func() bool { return tp.p.snapPinned.Load() == 0 })
	if err := drain(st); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the stalled stream ended with %v, want DeadlineExceeded", err)
	}
}

// TestSnapshotBudget: while one client's snapshot pins more than max_snapshot_bytes (one
// snapshot is admitted whatever its size), another subscription that needs a snapshot is
// refused with ResourceExhausted; once the first ends, the next is admitted.
func TestSnapshotBudget(t *testing.T) {
	e := newEnv(t, nil)
	bigSnapshot(e)
	// A small target budget: the stalled snapshot's rows stay pinned instead of moving
	// into its queue.
	tp := startPlayer(t, e, func(c *Config) {
		c.MaxSnapshotBytes, c.TargetBudgetBytes, c.MaxBatchBytes = 256<<10, 256<<10, 64<<10
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	st := subscribeAll(first, t, dialSmallWindows(t, tp.addr), "first")
	if m, err := st.Recv(); err != nil || m.GetSnapshotBegin() == nil {
		t.Fatalf("first frame %v, %v; want SnapshotBegin", m, err)
	}
	if tp.p.snapPinned.Load() <= 256<<10 {
		t.Fatalf("the stalled snapshot pins %d bytes, want more than the bound (the test needs a bigger snapshot)", tp.p.snapPinned.Load())
	}
	conn := dialSmallWindows(t, tp.addr)
	err := drain(subscribeAll(ctx, t, conn, "second"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "max_snapshot_bytes") {
		t.Fatalf("a second snapshot while the first pins the budget: %v, want ResourceExhausted naming max_snapshot_bytes", err)
	}
	cancelFirst()
	waitFor(t, 30*time.Second, "the first snapshot's rows released", func() bool { return tp.p.snapPinned.Load() == 0 })
	if m, err := subscribeAll(ctx, t, conn, "third").Recv(); err != nil || m.GetSnapshotBegin() == nil {
		t.Fatalf("a snapshot once none is pending: %v, %v", m, err)
	}
}
