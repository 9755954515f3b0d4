package cacheclient

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

type subStream = grpc.BidiStreamingServer[statecastv1.SubscribeRequest, statecastv1.SubscribeResponse]

// script plays one Subscribe stream: conn counts the streams of this player from 0.
// Returning nil keeps the stream open until the client goes; an error ends it.
type script func(conn int, h *statecastv1.Hello, s *fakeStream) error

// fakePlayer is a gRPC Player in the test that plays scripted frames.
type fakePlayer struct {
	statecastv1.UnimplementedPlayerServer
	addr   string
	mem    bool // startMemFake
	srv    *grpc.Server
	script script

	mu     sync.Mutex
	hellos []*statecastv1.Hello
	acks   []int64
	sent   int // row entries sent
	change chan struct{}
}

type fakeStream struct {
	s  subStream
	fp *fakePlayer
}

func startFake(t *testing.T, sc script) *fakePlayer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, lis, lis.Addr().String(), false, sc)
}

// memFakes are the fakes of startMemFake by address, for memDialer.
var (
	memFakes sync.Map // string → *bufconn.Listener
	memPorts atomic.Int32
)

// startMemFake is startFake on an in-memory listener, for tests in a synctest bubble: a
// goroutine blocked on a socket is not durably blocked, so the bubble's clock would never
// move, while one blocked on a bufconn pipe (a sync.Cond) is. Its address is a host:port
// that only memDialer reaches; clients of it need memDialer (startClient adds it).
func startMemFake(t *testing.T, sc script) *fakePlayer {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	addr := fmt.Sprintf("127.0.0.77:%d", memPorts.Add(1))
	memFakes.Store(addr, lis)
	t.Cleanup(func() { memFakes.Delete(addr) })
	return serveFake(t, lis, addr, true, sc)
}

// memDialer makes a client dial the in-memory fakes instead of TCP.
func memDialer() Option {
	return WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		lis, ok := memFakes.Load(addr)
		if !ok {
			return nil, fmt.Errorf("no in-memory fake player at %s", addr)
		}
		return lis.(*bufconn.Listener).DialContext(ctx)
	}))
}

func serveFake(t *testing.T, lis net.Listener, addr string, mem bool, sc script) *fakePlayer {
	fp := &fakePlayer{addr: addr, mem: mem, srv: grpc.NewServer(), script: sc, change: make(chan struct{})}
	statecastv1.RegisterPlayerServer(fp.srv, fp)
	done := make(chan struct{})
	go func() { defer close(done); fp.srv.Serve(lis) }()
	t.Cleanup(func() { fp.srv.Stop(); <-done })
	return fp
}

func (fp *fakePlayer) notify() {
	close(fp.change)
	fp.change = make(chan struct{})
}

func (fp *fakePlayer) Subscribe(s subStream) error {
	m, err := s.Recv()
	if err != nil {
		return err
	}
	h := m.GetHello()
	fp.mu.Lock()
	conn := len(fp.hellos)
	fp.hellos = append(fp.hellos, h)
	fp.notify()
	fp.mu.Unlock()
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			fp.mu.Lock()
			fp.acks = append(fp.acks, m.GetAck().GetIndex())
			fp.notify()
			fp.mu.Unlock()
		}
	}()
	if err := fp.script(conn, h, &fakeStream{s: s, fp: fp}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// waitFor polls the fake's recorded state until cond holds.
func (fp *fakePlayer) waitFor(t *testing.T, what string, cond func(hellos []*statecastv1.Hello, acks []int64) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		fp.mu.Lock()
		ok := cond(fp.hellos, fp.acks)
		ch := fp.change
		fp.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			fp.mu.Lock()
			defer fp.mu.Unlock()
			t.Fatalf("timed out waiting for %s (%d hellos, last %v; acks %v)", what, len(fp.hellos), fp.hellos[max(len(fp.hellos)-1, 0):], fp.acks[max(len(fp.acks)-5, 0):])
		}
	}
}

func lastAck(acks []int64) int64 {
	if len(acks) == 0 {
		return -1
	}
	return acks[len(acks)-1]
}

// waitAck blocks until the client acknowledged index (or the stream ended).
func (f *fakeStream) waitAck(index int64) error {
	for {
		f.fp.mu.Lock()
		ok := lastAck(f.fp.acks) >= index
		ch := f.fp.change
		f.fp.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-f.s.Context().Done():
			return f.s.Context().Err()
		}
	}
}

func (f *fakeStream) send(m *statecastv1.SubscribeResponse) error { return f.s.Send(m) }

func (f *fakeStream) batch(es ...*statecastv1.Entry) error {
	f.fp.mu.Lock()
	f.fp.sent += len(es)
	f.fp.mu.Unlock()
	return f.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}})
}

func (f *fakeStream) snapshot(index int64, es ...*statecastv1.Entry) error {
	if err := f.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: index}}}); err != nil {
		return err
	}
	if len(es) > 0 {
		if err := f.batch(es...); err != nil {
			return err
		}
	}
	return f.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: index}}})
}

func (f *fakeStream) progress(index int64) error {
	return f.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: index}}})
}

func (f *fakeStream) resync(reason statecastv1.ResyncRequired_Reason) error {
	return f.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: &statecastv1.ResyncRequired{Reason: reason}}})
}

var testSourceTime = timestamppb.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

func ent(index int64, key, value string) *statecastv1.Entry {
	return &statecastv1.Entry{Index: index, View: "events", Kind: statecastv1.Kind_KIND_ROW, Key: []byte("events|" + key),
		Value: []byte(value), Tombstone: value == "", SourceTime: testSourceTime}
}

func epochEndEntry(index int64, rows int64, hash uint64) *statecastv1.Entry {
	return &statecastv1.Entry{Index: index, View: "events", Kind: statecastv1.Kind_KIND_EPOCH_END, Key: record.ControlKey("events", record.KindEpochEnd),
		Value: (&record.EpochEnd{Epoch: 1, Rows: rows, Hash: hash, SourceLSN: "0/0"}).Marshal()}
}

func evJSON(id int, sport string) string { return fmt.Sprintf(`{"id":%d,"sport":%q}`, id, sport) }

// startClient starts a client with an "events" view on the fakes and closes it at cleanup.
func startClient(t *testing.T, cfg Config, setup func(c *Client, v *View[event]), fps ...*fakePlayer) (*Client, *View[event]) {
	t.Helper()
	var opts []Option
	for _, fp := range fps {
		cfg.Addresses = append(cfg.Addresses, fp.addr)
		if fp.mem && opts == nil {
			opts = append(opts, memDialer())
		}
	}
	cfg.Stream, cfg.Service = "s", "t"
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 10*time.Millisecond
	}
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Register(c, "events", decodeEvent)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("sport", func(e event) []string { return []string{e.Sport} }); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(c, v)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, v
}

func waitReady(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// eventually polls cond (a condition on the client's state) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
