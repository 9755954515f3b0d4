package player

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// A SubscribeMany stream carries many targets, one per channel. Each channel's target is
// the same as a Subscribe stream's (open, admit, queue, sender, health check); what
// differs is where its frames go and how it learns of acks and of its end:
//
//   - goroutines per stream, none per channel: the handler (SubscribeMany: waits for the
//     stream's end), the reader (many.read: opens channels, routes acks and closes to
//     their targets) and the writer of ends (many.endLoop: sends each ended channel's
//     ChannelEnd and releases its target); while Hellos wait, an admitter (admitLoop,
//     started on demand like a sender) opens them in order (open may wait for a stream
//     to be ready, so not on the reader, whose acks would wait);
//   - a channel's sender (target.drain, started on demand as for any target) writes
//     through manyChan.SendMsg: the SubscribeResponse's parts behind a header of the
//     channel, under the stream's send lock (gRPC allows one SendMsg at a time);
//   - a target's end reaches the stream through target.whenEnded (many.ended), not a
//     goroutine waiting for done.
//
// A send that blocks (the client does not read) holds every channel's frames behind it:
// when the health check times one out (errSendBlocked), the whole stream ends.
type many struct {
	sv   *service
	srv  statecastv1.Player_SubscribeManyServer
	pr   Principal
	send sync.Mutex // one SendMsg at a time on srv

	mu     sync.Mutex
	chans  map[uint32]*manyChan // the channels opened and not yet released
	last   uint32               // the highest channel opened: a Hello names a higher one
	ends   []*manyChan          // ended channels whose end endLoop has not sent yet
	closed bool                 // the stream is ending: channels are released, not ended
	hellos []manyHello          // Hellos admitLoop has not opened yet
	admits bool                 // an admitLoop runs

	wake     chan struct{} // cap 1: ends grew
	quit     chan struct{} // closed by the handler when it returns
	fail     chan struct{} // closed by failWith: the whole stream ends
	failErr  error
	failOnce sync.Once
}

type manyHello struct {
	c     *manyChan
	hello *statecastv1.Hello
}

// manyChan is one channel of a SubscribeMany stream: the frameSender of its target.
// m.mu guards t, release and closing.
type manyChan struct {
	m       *many
	ch      uint32
	t       *target // nil while its Hello is admitted, and for a refused Hello
	release func()  // open's: removes the target from its stream
	closing bool    // the client closed the channel while its Hello was admitted
	refused error   // why its Hello was refused (t nil)
}

// SubscribeMany is the handler of a stream of channels (see many). It returns when the
// client ends the stream, a send to it blocked for AckTimeout, a message breaks the
// protocol (InvalidArgument), or the player closes; every channel still open then ends
// with it, without a ChannelEnd of its own.
func (sv *service) SubscribeMany(srv statecastv1.Player_SubscribeManyServer) error {
	p := sv.p
	m := &many{sv: sv, srv: srv, pr: principalFrom(srv.Context()), chans: map[uint32]*manyChan{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), fail: make(chan struct{})}
	p.goTracked(m.read)
	p.goTracked(m.endLoop)
	var err error
	select {
	case <-m.fail:
		err = m.failErr
	case <-srv.Context().Done():
		err = fmt.Errorf("%w: %v", ErrSuspended, srv.Context().Err())
	case <-p.ctx.Done():
		err = ErrClosed
	}
	m.shut(err)
	return toStatus(err)
}

// failWith ends the whole stream with err (the first cause wins).
func (m *many) failWith(err error) {
	m.failOnce.Do(func() {
		m.failErr = err
		close(m.fail)
	})
}

// shut ends every open channel's target with err and lets endLoop release them all.
func (m *many) shut(err error) {
	m.mu.Lock()
	m.closed = true
	var ts []*target
	for _, c := range m.chans {
		if c.t != nil {
			ts = append(ts, c.t)
		}
	}
	m.mu.Unlock()
	for _, t := range ts {
		t.suspend(err)
	}
	close(m.quit)
}

// read is the stream's reader: Hellos open channels, Acks go to their channel's target,
// closes end it. A message that breaks the protocol of the stream itself ends it.
func (m *many) read() {
	for {
		req, err := m.srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: client closed its send side", ErrSuspended)
			}
			m.failWith(err)
			return
		}
		if err := m.route(req); err != nil {
			m.failWith(err)
			return
		}
	}
}

// route handles one message of a channel.
func (m *many) route(req *statecastv1.SubscribeManyRequest) error {
	ch := req.GetChannel()
	m.mu.Lock()
	c := m.chans[ch]
	if hello := req.GetRequest().GetHello(); hello != nil {
		if ch <= m.last {
			m.mu.Unlock()
			return fmt.Errorf("%w: channel %d opened after channel %d: each Hello needs a channel above every channel opened before on the stream", ErrBadHello, ch, m.last)
		}
		m.last = ch
		if m.closed {
			m.mu.Unlock()
			return nil
		}
		c = &manyChan{m: m, ch: ch}
		m.chans[ch] = c
		m.hellos = append(m.hellos, manyHello{c, hello})
		start := !m.admits
		m.admits = true
		m.mu.Unlock()
		if start {
			m.sv.p.goTracked(m.admitLoop)
		}
		return nil
	}
	var t *target
	if c != nil {
		t = c.t
		if t == nil && req.GetClose() {
			c.closing = true
		}
	}
	m.mu.Unlock()
	if t == nil {
		return nil // a channel that ended, or whose Hello is being admitted
	}
	if req.GetClose() {
		t.suspend(fmt.Errorf("the client closed channel %d: %w", ch, context.Canceled))
		return nil
	}
	if err := t.onRequest(req.GetRequest()); err != nil {
		t.suspend(err)
	}
	return nil
}

// admitLoop opens the waiting Hellos, in order, and ends when none is left.
func (m *many) admitLoop() {
	for {
		m.mu.Lock()
		if len(m.hellos) == 0 || m.closed {
			for _, h := range m.hellos {
				delete(m.chans, h.c.ch) // not opened: nothing to release
			}
			m.hellos = nil
			m.admits = false
			m.mu.Unlock()
			return
		}
		h := m.hellos[0]
		m.hellos[0] = manyHello{}
		m.hellos = m.hellos[1:]
		m.mu.Unlock()
		m.admit(h.c, h.hello)
	}
}

// admit opens c's target (service.open, as a Subscribe stream's) and starts serving it.
func (m *many) admit(c *manyChan, hello *statecastv1.Hello) {
	t, release, err := m.sv.open(m.srv.Context(), m.pr, hello, false)
	m.mu.Lock()
	if m.closed {
		delete(m.chans, c.ch)
		m.mu.Unlock()
		if err == nil {
			t.suspend(ErrClosed)
			release()
		}
		return
	}
	if err != nil {
		c.refused = err
		m.ends = append(m.ends, c)
		m.mu.Unlock()
		m.wakeUp()
		return
	}
	c.t, c.release = t, release
	closing := c.closing
	m.mu.Unlock()
	t.whenEnded(func() { m.ended(c) })
	if closing {
		t.suspend(fmt.Errorf("the client closed channel %d: %w", c.ch, context.Canceled))
	}
	t.startSending(c)
}

// ended is c's target's onEnd: its end is queued for endLoop, unless the stream ends.
// An end for a blocked send ends the whole stream.
func (m *many) ended(c *manyChan) {
	t := c.t
	t.mu.Lock()
	err := t.err
	t.mu.Unlock()
	if errors.Is(err, errSendBlocked) {
		m.failWith(err)
	}
	m.mu.Lock()
	if !m.closed {
		m.ends = append(m.ends, c)
	}
	m.mu.Unlock()
	m.wakeUp()
}

func (m *many) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// endLoop is the writer of ends: for each ended channel, it releases the target and sends
// the channel's ChannelEnd. When the handler returns it releases every channel left.
func (m *many) endLoop() {
	for {
		select {
		case <-m.wake:
		case <-m.quit:
			m.mu.Lock()
			var left []*manyChan
			for ch, c := range m.chans {
				if c.release != nil {
					left = append(left, c)
				}
				delete(m.chans, ch)
			}
			m.ends = nil
			m.mu.Unlock()
			for _, c := range left {
				c.release()
			}
			return
		}
		for {
			m.mu.Lock()
			if len(m.ends) == 0 || m.closed {
				m.mu.Unlock()
				break
			}
			c := m.ends[0]
			m.ends[0] = nil
			m.ends = m.ends[1:]
			delete(m.chans, c.ch)
			m.mu.Unlock()
			if err := m.finish(c); err != nil {
				m.failWith(err)
			}
		}
	}
}

// finish releases an ended channel's target and tells the client why it ended.
func (m *many) finish(c *manyChan) error {
	err := c.refused
	if c.t != nil {
		c.release()
		c.t.mu.Lock()
		err = c.t.err
		c.t.mu.Unlock()
		c.t.s.log.Info("target ended", "target", c.t.id, "channel", c.ch, "err", err)
	}
	st := status.Convert(toStatus(err))
	return m.sendMsg(&statecastv1.SubscribeManyResponse{Channel: c.ch,
		End: &statecastv1.ChannelEnd{Code: int32(st.Code()), Message: st.Message()}})
}

// sendMsg sends one message on the stream: a ChannelEnd, or a channel's frame.
func (m *many) sendMsg(v any) error {
	m.send.Lock()
	defer m.send.Unlock()
	return m.srv.SendMsg(v)
}

// SendMsg sends one of the target's frames (rawParts: a marshalled SubscribeResponse) as
// a SubscribeManyResponse of its channel: a header of the channel and the response's
// length, then the parts as they are.
func (c *manyChan) SendMsg(v any) error {
	parts := v.(rawParts)
	n := 0
	for _, b := range parts {
		n += len(b)
	}
	hdr := make([]byte, 0, 16)
	hdr = protowire.AppendTag(hdr, wire.SubscribeManyResponseChannel, protowire.VarintType)
	hdr = protowire.AppendVarint(hdr, uint64(c.ch))
	hdr = protowire.AppendTag(hdr, wire.SubscribeManyResponseResponse, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(n))
	out := make(rawParts, 0, len(parts)+1)
	out = append(out, hdr)
	return c.m.sendMsg(append(out, parts...))
}
