package main

// Baselines for the player benchmarks: a bare gRPC fan-out (the transport's own limit:
// one Subscribe stream per receiver, one goroutine per stream, no queues, terms, acks or
// batching logic) and plain sarama consumers reading the topic directly.

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// rawMsg is an already marshalled SubscribeResponse, sent as is by rawCodec: the bare
// fan-out encodes each message once for all streams, as the player does, so the baseline
// is the transport's limit and not the cost of marshalling per stream.
type rawMsg []byte

type rawCodec struct{ base encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.base.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c rawCodec) Name() string { return c.base.Name() }

// encodeOnce marshals m for rawMsg.
func encodeOnce(m *statecastv1.SubscribeResponse) rawMsg {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// fanout is the bare gRPC fan-out server.
type fanout struct {
	statecastv1.UnimplementedPlayerServer
	depth int // per-stream channel capacity
	mu    sync.Mutex
	subs  []chan rawMsg
}

func (f *fanout) Subscribe(st statecastv1.Player_SubscribeServer) error {
	if _, err := st.Recv(); err != nil { // Hello
		return err
	}
	ch := make(chan rawMsg, f.depth)
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

// publishTo hands m to the streams of the given subscribers (by order of joining).
func (f *fanout) publishTo(subs []int, m rawMsg) {
	f.mu.Lock()
	all := f.subs
	f.mu.Unlock()
	for _, i := range subs {
		all[i] <- m
	}
}

func (f *fanout) joined() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// publish hands m to every stream's goroutine (blocking when a stream is depth behind).
func (f *fanout) publish(m rawMsg) {
	f.mu.Lock()
	subs := f.subs
	f.mu.Unlock()
	for _, ch := range subs {
		ch <- m
	}
}

// bareServer starts a bare fan-out on loopback and connects n receivers to it.
type bareServer struct {
	f     *fanout
	srv   *grpc.Server
	conns []*grpc.ClientConn
	recv  []*receiver
	wg    sync.WaitGroup
	stop  context.CancelFunc
}

func startBare(n, conns int, stalled func(int) bool) (*bareServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	depth := 1 << 16
	if n > 100 {
		depth = 1 << 12
	}
	b := &bareServer{f: &fanout{depth: depth}, srv: grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{base: encoding.GetCodecV2(gproto.Name)}))}
	statecastv1.RegisterPlayerServer(b.srv, b.f)
	go func() { _ = b.srv.Serve(lis) }()
	if b.conns, err = dial(lis.Addr().String(), conns); err != nil {
		b.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	// The receivers record every frame in a delivery checker, as the player's receivers do
	// (same receivers on both sides; the bare fan-out's record is not checked).
	chk := checker.New()
	for i := range n {
		r := &receiver{id: "t" + strconv.Itoa(i), stalled: stalled != nil && stalled(i)}
		id := r.id
		r.frames = func(resp *statecastv1.SubscribeResponse) { chk.Response(id, resp) }
		b.recv = append(b.recv, r)
		cli := statecastv1.NewPlayerClient(b.conns[i%len(b.conns)])
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			_ = r.run(ctx, cli, &statecastv1.Hello{ClientId: r.id, Stream: "bare"})
		}()
		// One at a time, so that subscriber i is f.subs[i].
		waitFor(10*time.Second, func() bool { return b.f.joined() == i+1 })
	}
	return b, nil
}

func (b *bareServer) close() {
	if b.stop != nil {
		b.stop()
	}
	b.srv.Stop()
	b.wg.Wait()
	for _, c := range b.conns {
		_ = c.Close()
	}
}

// bareEntry builds entry i of the bare fan-out, stamped with the dispatch time.
func bareEntry(i int, size, keys int) *statecastv1.Entry {
	return &statecastv1.Entry{Index: int64(i), Key: record.EncodeKey("v", strconv.Itoa(i%keys)),
		Value: payload(size, time.Now()), View: "v", Kind: statecastv1.Kind_KIND_ROW}
}

// consumers are n plain sarama consumers of partition 0, each with its own client, from
// offset start; each records (offset, payload stamp, arrival) per message.
type consumers struct {
	clients []sarama.Client
	got     []*receiver
	wg      sync.WaitGroup
	pcs     []sarama.PartitionConsumer
}

func startConsumers(brokers []string, topic string, n int, start int64) (*consumers, error) {
	c := &consumers{}
	for i := range n {
		cfg := kafkaconn.NewConfig("cachebench-consumer-" + strconv.Itoa(i))
		cfg.Consumer.MaxWaitTime = 100 * time.Millisecond // as the player's fetchers
		cl, err := sarama.NewClient(brokers, cfg)
		if err != nil {
			c.close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
		co, err := sarama.NewConsumerFromClient(cl)
		if err != nil {
			c.close()
			return nil, err
		}
		pc, err := co.ConsumePartition(topic, 0, start)
		if err != nil {
			c.close()
			return nil, err
		}
		c.pcs = append(c.pcs, pc)
		r := &receiver{id: "c" + strconv.Itoa(i)}
		c.got = append(c.got, r)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for m := range pc.Messages() {
				now := time.Now().UnixNano()
				var stamp int64
				if ts, ok := stampOf(m.Value); ok {
					stamp = ts.UnixNano()
				}
				r.mu.Lock()
				r.got = append(r.got, delivery{index: m.Offset, stamp: stamp, applied: now})
				r.mu.Unlock()
			}
		}()
	}
	return c, nil
}

func (c *consumers) close() {
	for _, pc := range c.pcs {
		pc.AsyncClose()
	}
	c.wg.Wait()
	for _, cl := range c.clients {
		_ = cl.Close()
	}
}
