package player

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// manyTestConn is a SubscribeMany stream shared by the sessions of several test clients:
// each session opens a channel on it and closes it when it ends. A stream that failed, or
// one to another address (a player started again), is replaced at the next open.
type manyTestConn struct {
	mu     sync.Mutex
	addr   string
	conn   *grpc.ClientConn
	st     grpc.BidiStreamingClient[statecastv1.SubscribeManyRequest, statecastv1.SubscribeManyResponse]
	cancel context.CancelFunc
	dead   bool
	next   uint32
	chans  map[uint32]*manyTestChan
	sendMu sync.Mutex
	ends   map[uint32]*statecastv1.ChannelEnd // every ChannelEnd received
}

type manyTestChan struct {
	m    *manyTestConn
	st   grpc.BidiStreamingClient[statecastv1.SubscribeManyRequest, statecastv1.SubscribeManyResponse]
	ch   uint32
	ctx  context.Context
	in   chan manyItem
	done chan struct{}
	once sync.Once
}

type manyItem struct {
	resp *statecastv1.SubscribeResponse
	err  error
}

func newManyTestConn(t *testing.T) *manyTestConn {
	m := &manyTestConn{chans: map[uint32]*manyTestChan{}, ends: map[uint32]*statecastv1.ChannelEnd{}}
	t.Cleanup(m.shut)
	return m
}

func (m *manyTestConn) shut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		m.cancel()
		_ = m.conn.Close()
		m.cancel = nil
	}
}

// open opens a channel to addr (its Hello is the session's first Send).
func (m *manyTestConn) open(ctx context.Context, addr string) (*manyTestChan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil || m.dead || m.addr != addr {
		if m.cancel != nil {
			m.cancel()
			_ = m.conn.Close()
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(context.Background())
		st, err := statecastv1.NewPlayerClient(conn).SubscribeMany(sctx)
		if err != nil {
			cancel()
			_ = conn.Close()
			return nil, err
		}
		m.addr, m.conn, m.st, m.cancel, m.dead = addr, conn, st, cancel, false
		go m.read(st)
	}
	m.next++
	c := &manyTestChan{m: m, st: m.st, ch: m.next, ctx: ctx, in: make(chan manyItem, 4096), done: make(chan struct{})}
	m.chans[c.ch] = c
	return c, nil
}

// read routes the stream's messages to their channels until it fails, then fails them.
func (m *manyTestConn) read(st grpc.BidiStreamingClient[statecastv1.SubscribeManyRequest, statecastv1.SubscribeManyResponse]) {
	for {
		resp, err := st.Recv()
		m.mu.Lock()
		if st != m.st {
			m.mu.Unlock()
			return
		}
		if err != nil {
			m.dead = true
			for ch, c := range m.chans {
				c.deliver(manyItem{err: err})
				delete(m.chans, ch)
			}
			m.mu.Unlock()
			return
		}
		c := m.chans[resp.GetChannel()]
		if end := resp.GetEnd(); end != nil {
			m.ends[resp.GetChannel()] = end
			delete(m.chans, resp.GetChannel())
		}
		m.mu.Unlock()
		if c == nil {
			continue
		}
		if end := resp.GetEnd(); end != nil {
			c.deliver(manyItem{err: status.Error(codes.Code(end.GetCode()), end.GetMessage())})
			continue
		}
		c.deliver(manyItem{resp: resp.GetResponse()})
	}
}

func (c *manyTestChan) deliver(it manyItem) {
	select {
	case c.in <- it:
	case <-c.done:
	}
}

func (c *manyTestChan) Send(req *statecastv1.SubscribeRequest) error {
	c.m.sendMu.Lock()
	defer c.m.sendMu.Unlock()
	return c.st.Send(&statecastv1.SubscribeManyRequest{Channel: c.ch, Request: req})
}

func (c *manyTestChan) Recv() (*statecastv1.SubscribeResponse, error) {
	select {
	case it := <-c.in:
		return it.resp, it.err
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	}
}

// close ends the channel: the player is told, and what still comes for it is dropped.
func (c *manyTestChan) close() {
	c.once.Do(func() {
		close(c.done)
		c.m.mu.Lock()
		delete(c.m.chans, c.ch)
		c.m.mu.Unlock()
		c.m.sendMu.Lock()
		_ = c.st.Send(&statecastv1.SubscribeManyRequest{Channel: c.ch, Close: true})
		c.m.sendMu.Unlock()
	})
}

// TestSubscribeManyEveryPath: targets that are channels of one SubscribeMany stream get
// what targets of their own Subscribe streams get, through every path (a snapshot and
// live, recoveries from the history and from Kafka, a resync), filtered and whole: the
// delivery checker checks each.
func TestSubscribeManyEveryPath(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	rnd := newRand(31)
	e.produceSel(200, rnd)
	m := newManyTestConn(t)
	var clients []*client
	for g := range 4 {
		c := newClient(fmt.Sprintf("g%d", g), e.chk, "a")
		c.sels = []*statecastv1.Selection{{View: "a", Filter: fmt.Sprintf("g == %d", g)}}
		c.model = map[string]checker.Selection{"a": groupModel(func(x int) bool { return x == g })}
		c.many = m
		clients = append(clients, c)
	}
	whole := newClient("whole", e.chk, "a", "b")
	whole.many = m
	own := newClient("own", e.chk, "a", "b") // a Subscribe stream of its own, beside them
	clients = append(clients, whole, own)
	selectionPaths(t, e, rnd, clients, nil, nil)
	for _, c := range clients[:4] {
		if c.rowsGot == 0 {
			t.Errorf("%s received no row", c.id)
		}
	}
	if whole.rowsGot != own.rowsGot || whole.tombsGot != own.tombsGot {
		t.Errorf("the whole views on a channel: %d rows, %d tombstones; on a stream of their own: %d, %d", whole.rowsGot, whole.tombsGot, own.rowsGot, own.tombsGot)
	}
}

// TestSubscribeManyChannels: a channel's end is its own (a refused Hello, a close), the
// stream's end is every channel's (a channel opened twice), and a channel costs the player
// no goroutine.
func TestSubscribeManyChannels(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	e.produceSel(100, newRand(37))
	tp := startPlayer(t, e, nil)
	conn, err := grpc.NewClient(tp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := statecastv1.NewPlayerClient(conn).SubscribeMany(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := func(ch uint32, h *statecastv1.Hello) {
		t.Helper()
		h.Stream, h.ProtocolVersion = "s", 2
		if err := st.Send(&statecastv1.SubscribeManyRequest{Channel: ch, Request: &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: h}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Until every channel of want has caught up (its Progress after the snapshot), or
	// ended: what each got.
	type got struct {
		rows     int
		caughtUp bool
		end      *statecastv1.ChannelEnd
	}
	chans := map[uint32]*got{}
	recvUntil := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			resp, err := st.Recv()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			g := chans[resp.GetChannel()]
			if g == nil {
				g = &got{}
				chans[resp.GetChannel()] = g
			}
			if g.end != nil {
				t.Fatalf("channel %d: a message after its end", resp.GetChannel())
			}
			if end := resp.GetEnd(); end != nil {
				g.end = end
				continue
			}
			r := resp.GetResponse()
			if b := r.GetBatch(); b != nil {
				g.rows += len(b.GetEntries())
			}
			if r.GetProgress() != nil {
				g.caughtUp = true
			}
		}
	}
	const n = 300
	before := runtime.NumGoroutine()
	for ch := uint32(1); ch <= n; ch++ {
		hello(ch, &statecastv1.Hello{ClientId: fmt.Sprintf("c%d", ch), Views: []string{"a"},
			Selections: []*statecastv1.Selection{{View: "a", Filter: fmt.Sprintf("g == %d", ch%10)}}})
	}
	hello(n+1, &statecastv1.Hello{ClientId: "bad", Views: []string{"nosuchview"}})
	recvUntil("the channels' snapshots", func() bool {
		if g := chans[n+1]; g == nil || g.end == nil {
			return false
		}
		for ch := uint32(1); ch <= n; ch++ {
			if g := chans[ch]; g == nil || !g.caughtUp {
				return false
			}
		}
		return true
	})
	if end := chans[n+1].end; codes.Code(end.GetCode()) != codes.NotFound || !strings.Contains(end.GetMessage(), "nosuchview") {
		t.Errorf("the refused channel's end: %v, want NotFound naming the view", end)
	}
	rows := 0
	for ch := uint32(1); ch <= n; ch++ {
		rows += chans[ch].rows
	}
	if rows == 0 {
		t.Error("no channel received a row")
	}
	// The player runs in this process: its goroutines grow with the stream, not with its
	// channels (a Subscribe stream each would have added two per target).
	if grown := runtime.NumGoroutine() - before; grown > n/10 {
		t.Errorf("%d channels added %d goroutines", n, grown)
	} else {
		t.Logf("%d channels added %d goroutines", n, runtime.NumGoroutine()-before)
	}
	if got := len(tp.p.Status().Streams[0].Targets); got != n {
		t.Errorf("the player holds %d targets, want %d", got, n)
	}

	// A close ends its channel only: the player answers with its end (Canceled).
	if err := st.Send(&statecastv1.SubscribeManyRequest{Channel: 7, Close: true}); err != nil {
		t.Fatal(err)
	}
	recvUntil("channel 7's end", func() bool { return chans[7].end != nil })
	if c := codes.Code(chans[7].end.GetCode()); c != codes.Canceled {
		t.Errorf("channel 7 closed by the client ended with %v, want Canceled", c)
	}
	waitFor(t, 30*time.Second, "the closed channel's target to go", func() bool { return len(tp.p.Status().Streams[0].Targets) == n-1 })

	// A Subscribe stream of channel 9's instance replaces its target: channel 9 ends
	// (Aborted), the new stream is served.
	sub, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{ClientId: "c9", Stream: "s", Views: []string{"a"}}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Recv(); err != nil || m.GetSnapshotBegin() == nil {
		t.Fatalf("the replacing stream's first frame %v, %v; want SnapshotBegin", m, err)
	}
	recvUntil("channel 9's end", func() bool { return chans[9].end != nil })
	if c := codes.Code(chans[9].end.GetCode()); c != codes.Aborted {
		t.Errorf("channel 9, replaced, ended with %v, want Aborted", c)
	}

	// A Hello on a channel opened before breaks the stream's protocol: it ends, and every
	// channel's target with it.
	hello(5, &statecastv1.Hello{ClientId: "again", Views: []string{"a"}})
	for {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "channel 5") {
			t.Errorf("the stream ended with %v, want InvalidArgument naming channel 5", err)
		}
		break
	}
	waitFor(t, 30*time.Second, "every channel's target to go", func() bool {
		ts := tp.p.Status().Streams[0].Targets
		return len(ts) == 1 && ts[0].ID == "c9" // the Subscribe stream's
	})
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// TestSubscribeManyStalled: a client that stops reading its SubscribeMany stream blocks the
// player's sends for every channel: once one has been blocked for the ack time-out, the
// whole stream ends (DeadlineExceeded), every channel's target with it, and the snapshot
// stops pinning rows.
func TestSubscribeManyStalled(t *testing.T) {
	e := newEnv(t, nil)
	bigSnapshot(e)
	tp := startPlayer(t, e, func(c *Config) { c.AckTimeout = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := statecastv1.NewPlayerClient(dialSmallWindows(t, tp.addr)).SubscribeMany(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for ch := uint32(1); ch <= 3; ch++ {
		h := &statecastv1.Hello{ClientId: fmt.Sprintf("stalled%d", ch), Stream: "s"}
		if err := st.Send(&statecastv1.SubscribeManyRequest{Channel: ch, Request: &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: h}}}); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := st.Recv(); err != nil || m.GetResponse().GetSnapshotBegin() == nil {
		t.Fatalf("first message %v, %v; want a SnapshotBegin", m, err)
	}
	// Stop reading: the player's sends block on flow control.
	waitFor(t, 30*time.Second, "the stalled channels' targets to go", func() bool {
		return len(tp.p.Status().Streams[0].Targets) == 0
	})
	waitFor(t, 30*time.Second, "the snapshots' rows released", func() bool { return tp.p.snapPinned.Load() == 0 })
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the stalled stream ended with %v, want DeadlineExceeded", err)
	}
}
