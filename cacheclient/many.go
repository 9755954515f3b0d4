package cacheclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// Many lets Clients share, per player address, one connection and one SubscribeMany
// stream: a Client made with WithMany subscribes as a channel of that stream instead of a
// Subscribe stream of its own (schemas/proto/README.md, "Many subscriptions on one
// stream"). The player then keeps no goroutine and no gRPC stream per Client, which is
// what a process holding many subscriptions at once needs (a gateway with one filtered
// Client per connected user). Each Client is otherwise unchanged: its views, selections,
// readiness, failover and state directory are its own, and a channel that ends is
// subscribed again as a stream would be.
//
// The Clients that share a Many share its connections, which are dialled with the
// settings (TLS, token, dial options) of the first Client that needs each address: give
// one Many only to Clients with the same settings. The stream's flow control is shared
// too: a Client whose frames wait unread (its apply is slow) holds up the others.
//
// A Many is safe for concurrent use. Close it after the Clients that use it.
type Many struct {
	mu     sync.Mutex
	conns  map[string]*manyConn // by address
	closed bool
}

// NewMany returns an empty Many: it dials each address when a Client first needs it.
func NewMany() *Many { return &Many{conns: map[string]*manyConn{}} }

// WithMany makes the Client subscribe as a channel of m's stream to each player (see
// Many) instead of a Subscribe stream of its own.
func WithMany(m *Many) Option { return func(o *options) { o.many = m } }

// Close closes every connection: the Clients still using m lose their subscriptions and
// retry (on the same, closed, Many: Close their Clients first).
func (m *Many) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for addr, mc := range m.conns {
		mc.shut()
		delete(m.conns, addr)
	}
	return nil
}

var errManyClosed = errors.New("cacheclient: Many closed")

// manyConn is one address's connection and its current SubscribeMany stream.
type manyConn struct {
	cc    *grpc.ClientConn
	users int // Clients holding it (conn); closed when none is left

	mu     sync.Mutex
	st     grpc.ClientStream // nil: none (not opened yet, or failed)
	cancel context.CancelFunc
	next   uint32 // the last channel opened on st
	chans  map[uint32]*manyChannel
	sendMu sync.Mutex // one SendMsg at a time on st
}

// conn returns the shared connection to addr, dialled with opts when it is the first, and
// the function that gives it back.
func (m *Many) conn(addr string, opts []grpc.DialOption) (*grpc.ClientConn, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errManyClosed
	}
	mc := m.conns[addr]
	if mc == nil {
		cc, err := grpc.NewClient(addr, opts...)
		if err != nil {
			return nil, nil, err
		}
		mc = &manyConn{cc: cc, chans: map[uint32]*manyChannel{}}
		m.conns[addr] = mc
	}
	mc.users++
	var once sync.Once
	return mc.cc, func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if mc.users--; mc.users == 0 && m.conns[addr] == mc {
				mc.shut()
				delete(m.conns, addr)
			}
		})
	}, nil
}

// open opens a channel on addr's stream (opening the stream when it has none); the
// channel ends when ctx does.
func (m *Many) open(ctx context.Context, addr string, codec *frameCodec, maxRecv int) (*manyChannel, error) {
	m.mu.Lock()
	mc := m.conns[addr]
	m.mu.Unlock()
	if mc == nil {
		return nil, errManyClosed
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.st == nil {
		sctx, cancel := context.WithCancel(context.Background())
		st, err := mc.cc.NewStream(sctx, &statecastv1.Player_ServiceDesc.Streams[1], statecastv1.Player_SubscribeMany_FullMethodName,
			grpc.ForceCodecV2(manyCodec{}), grpc.MaxCallRecvMsgSize(maxRecv+64))
		if err != nil {
			cancel()
			return nil, err
		}
		mc.st, mc.cancel, mc.next = st, cancel, 0
		go mc.read(st)
	}
	mc.next++
	ch := &manyChannel{mc: mc, st: mc.st, ch: mc.next, ctx: ctx, codec: codec,
		in: make(chan manyItem, 16), done: make(chan struct{})}
	mc.chans[ch.ch] = ch
	context.AfterFunc(ctx, ch.close)
	return ch, nil
}

// shut ends the stream and closes the connection. m.mu held.
func (mc *manyConn) shut() {
	mc.mu.Lock()
	if mc.cancel != nil {
		mc.cancel()
	}
	mc.st = nil
	mc.mu.Unlock()
	_ = mc.cc.Close()
}

// read routes the stream's messages to their channels until the stream fails, then
// fails every channel of it with its error (each Client subscribes again).
func (mc *manyConn) read(st grpc.ClientStream) {
	for {
		var b []byte
		err := st.RecvMsg(&b)
		var ch uint32
		var it manyItem
		if err == nil {
			ch, it, err = parseMany(b)
		}
		if err != nil {
			mc.mu.Lock()
			if mc.st == st {
				mc.st = nil
				mc.cancel()
			}
			var fail []*manyChannel
			for n, c := range mc.chans {
				if c.st == st {
					fail = append(fail, c)
					delete(mc.chans, n)
				}
			}
			mc.mu.Unlock()
			for _, c := range fail {
				c.deliver(manyItem{err: err})
			}
			return
		}
		mc.mu.Lock()
		c := mc.chans[ch]
		if c != nil && c.st != st {
			c = nil
		}
		if c != nil && it.err != nil {
			delete(mc.chans, ch) // its end: nothing of it follows
		}
		mc.mu.Unlock()
		if c != nil {
			c.deliver(it)
		}
	}
}

// parseMany reads a SubscribeManyResponse: its channel and either the SubscribeResponse's
// bytes (aliasing b) or the channel's end as a gRPC status error. A message with both a
// response and an end, neither, or either twice, is malformed (the player writes each
// message with one of them once).
func parseMany(b []byte) (uint32, manyItem, error) {
	var ch uint32
	var it manyItem
	var end []byte
	resp, ended := false, false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber { // as proto.Unmarshal refuses it
			return 0, it, errFrame
		}
		b = b[n:]
		switch {
		case num == wire.SubscribeManyResponseChannel && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, it, errFrame
			}
			ch, b = uint32(v), b[n:]
		case num == wire.SubscribeManyResponseResponse && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, it, errFrame
			}
			if resp {
				return 0, it, fmt.Errorf("%w: a SubscribeManyResponse with two responses", errFrame)
			}
			it.b, b, resp = v, b[n:], true
		case num == wire.SubscribeManyResponseEnd && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, it, errFrame
			}
			if ended {
				return 0, it, fmt.Errorf("%w: a SubscribeManyResponse with two ends", errFrame)
			}
			end, b, ended = v, b[n:], true
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, it, errFrame
			}
			b = b[n:]
		}
	}
	if resp == ended {
		return 0, it, fmt.Errorf("%w: a SubscribeManyResponse needs a response or an end", errFrame)
	}
	if ended {
		var e statecastv1.ChannelEnd
		if err := proto.Unmarshal(end, &e); err != nil {
			return 0, it, fmt.Errorf("%w: %v", errFrame, err)
		}
		// As a stream's end: OK is the stream's end of file, anything else its status.
		it.err = io.EOF
		if e.GetCode() != int32(codes.OK) {
			it.err = status.Error(codes.Code(e.GetCode()), e.GetMessage())
		}
	}
	return ch, it, nil
}

// manyCodec sends requests with protobuf and receives each SubscribeManyResponse as its
// bytes (materialize: the frame decoded from them aliases them).
type manyCodec struct{}

func (manyCodec) Name() string { return "proto" }

// Marshal sends requests as the Subscribe stream does.
func (manyCodec) Marshal(v any) (mem.BufferSlice, error) { return frameCodec{}.Marshal(v) }

func (manyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("cacheclient: cannot unmarshal into %T", v)
	}
	*p = materialize(data)
	return nil
}

type manyItem struct {
	b   []byte // a SubscribeResponse
	err error  // or the channel's end (a status), or the stream's failure
}

// manyChannel is one Client's subscription on a SubscribeMany stream: the stream a
// session reads (grpc.BidiStreamingClient), fed by the stream's reader.
type manyChannel struct {
	mc    *manyConn
	st    grpc.ClientStream
	ch    uint32
	ctx   context.Context
	codec *frameCodec
	in    chan manyItem
	done  chan struct{}
	once  sync.Once
}

func (c *manyChannel) deliver(it manyItem) {
	select {
	case c.in <- it:
	case <-c.done:
	}
}

// Send sends a request of the channel.
func (c *manyChannel) Send(req *statecastv1.SubscribeRequest) error {
	return c.send(&statecastv1.SubscribeManyRequest{Channel: c.ch, Request: req})
}

func (c *manyChannel) send(m *statecastv1.SubscribeManyRequest) error {
	c.mc.sendMu.Lock()
	defer c.mc.sendMu.Unlock()
	return c.st.SendMsg(m)
}

// Recv returns the channel's next frame, or its end.
func (c *manyChannel) Recv() (*frame, error) {
	select {
	case it := <-c.in:
		if it.err != nil {
			return nil, it.err
		}
		f := new(frame)
		if err := decodeFrame(it.b, c.codec, f); err != nil {
			return nil, err
		}
		return f, nil
	case <-c.ctx.Done():
		return nil, status.FromContextError(c.ctx.Err()).Err()
	}
}

// close ends the channel (its session ended): the player is told, and what still comes
// for it is dropped.
func (c *manyChannel) close() {
	c.once.Do(func() {
		close(c.done)
		c.mc.mu.Lock()
		if c.mc.chans[c.ch] == c {
			delete(c.mc.chans, c.ch)
		}
		c.mc.mu.Unlock()
		_ = c.send(&statecastv1.SubscribeManyRequest{Channel: c.ch, Close: true})
	})
}

// CloseSend ends the channel.
func (c *manyChannel) CloseSend() error { c.close(); return nil }

// Context is the channel's: its session's.
func (c *manyChannel) Context() context.Context { return c.ctx }

// Header, Trailer, SendMsg and RecvMsg complete grpc.ClientStream: a channel has no
// headers of its own, and its messages go through Send and Recv.
func (c *manyChannel) Header() (metadata.MD, error) { return nil, nil }
func (c *manyChannel) Trailer() metadata.MD         { return nil }
func (c *manyChannel) SendMsg(any) error {
	return errors.New("cacheclient: a channel sends with Send")
}
func (c *manyChannel) RecvMsg(any) error {
	return errors.New("cacheclient: a channel receives with Recv")
}
