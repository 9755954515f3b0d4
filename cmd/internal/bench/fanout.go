package bench

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/internal/checker"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// RawMsg is an already marshalled SubscribeResponse, sent as is by the bare fan-out: it
// encodes each message once for all streams, as the player does, so the baseline is the
// transport's limit and not the cost of marshalling per stream.
type RawMsg []byte

type rawCodec struct{ base encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(RawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.base.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c rawCodec) Name() string { return c.base.Name() }

// encodeOnce marshals m for the bare fan-out.
func encodeOnce(m *statecastv1.SubscribeResponse) RawMsg {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err) // a SubscribeResponse built in memory always marshals
	}
	return b
}

// EncodeBatch marshals a batch frame of the entries for the bare fan-out.
func EncodeBatch(entries ...*statecastv1.Entry) RawMsg {
	return encodeOnce(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{
		Batch: &statecastv1.Batch{Entries: entries}}})
}

// BareEntry builds entry i of the bare fan-out: a row of view "v" with key i mod keys and
// a payload of size bytes stamped now (the dispatch time).
func BareEntry(i int, size, keys int) *statecastv1.Entry {
	return &statecastv1.Entry{Index: int64(i), Key: record.EncodeKey("v", strconv.Itoa(i%keys)),
		Value: Payload(size, time.Now()), View: "v", Kind: statecastv1.Kind_KIND_ROW}
}

// fanout is the bare gRPC fan-out server: one Subscribe stream per receiver, one goroutine
// per stream, no queues, terms, acks or batching logic.
type fanout struct {
	statecastv1.UnimplementedPlayerServer
	depth int // per-stream channel capacity
	mu    sync.Mutex
	subs  []chan RawMsg
}

func (f *fanout) Subscribe(st statecastv1.Player_SubscribeServer) error {
	if _, err := st.Recv(); err != nil { // Hello
		return err
	}
	ch := make(chan RawMsg, f.depth)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	go func() { // acks: read and dropped
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	for {
		select {
		case m := <-ch:
			if err := st.SendMsg(m); err != nil {
				return err
			}
		case <-st.Context().Done():
			return nil
		}
	}
}

func (f *fanout) joined() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Bare is a bare gRPC fan-out on loopback with its receivers connected.
type Bare struct {
	Recv []*Receiver // Recv[i] is subscriber i

	f     *fanout
	srv   *grpc.Server
	conns []*grpc.ClientConn
	wg    sync.WaitGroup
	stop  context.CancelFunc
}

// StartBare starts a bare fan-out and connects n receivers to it over conns client
// connections; stalled(i) makes receiver i never read.
func StartBare(n, conns int, stalled func(int) bool) (*Bare, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// Deep enough that dispatch never waits for a stream at the benchmarks' rates; smaller
	// for many subscribers, which would otherwise hold gigabytes of buffered frames.
	depth := 1 << 16
	if n > 100 {
		depth = 1 << 12
	}
	b := &Bare{f: &fanout{depth: depth}, srv: grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{base: encoding.GetCodecV2(gproto.Name)}))}
	statecastv1.RegisterPlayerServer(b.srv, b.f)
	go func() { _ = b.srv.Serve(lis) }()
	if b.conns, err = dial(lis.Addr().String(), conns); err != nil {
		b.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	// The receivers record every frame in a delivery checker, as the player's receivers do
	// (same receivers on both sides; the bare fan-out's record is not checked).
	chk := checker.New()
	for i := range n {
		r := &Receiver{ID: "t" + strconv.Itoa(i), Stalled: stalled != nil && stalled(i)}
		id := r.ID
		r.Frames = func(resp *statecastv1.SubscribeResponse) { chk.Response(id, resp) }
		b.Recv = append(b.Recv, r)
		cli := statecastv1.NewPlayerClient(b.conns[i%len(b.conns)])
		b.wg.Go(func() {
			_ = r.Run(ctx, cli, &statecastv1.Hello{ClientId: r.ID, Stream: "bare"})
		})
		// One at a time, so that subscriber i is f.subs[i].
		WaitFor(10*time.Second, func() bool { return b.f.joined() == i+1 })
	}
	return b, nil
}

// Publish hands m to every stream's goroutine (blocking when a stream is depth behind).
func (b *Bare) Publish(m RawMsg) {
	b.f.mu.Lock()
	subs := b.f.subs
	b.f.mu.Unlock()
	for _, ch := range subs {
		ch <- m
	}
}

// PublishTo hands m to the streams of the given subscribers (indexes into Recv).
func (b *Bare) PublishTo(subs []int, m RawMsg) {
	b.f.mu.Lock()
	all := b.f.subs
	b.f.mu.Unlock()
	for _, i := range subs {
		all[i] <- m
	}
}

// Close stops the server and the receivers and waits for them.
func (b *Bare) Close() {
	if b.stop != nil {
		b.stop()
	}
	b.srv.Stop()
	b.wg.Wait()
	for _, c := range b.conns {
		_ = c.Close()
	}
}
