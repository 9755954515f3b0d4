package bench

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// Delivery is one entry applied by a receiver.
type Delivery struct {
	Index   int64
	Stamp   int64 // payload stamp, unix ns (dispatch time for the bare fan-out, produce time otherwise); 0 if none
	Applied int64 // when the receiver had it, unix ns
}

// Receiver is one in-process target: a gRPC Subscribe stream that applies every entry
// (records its arrival), acks cumulatively after each frame like cacheclient, and
// optionally hands each frame to a hook (the delivery checker). The plain consumers
// record into receivers too, so every system is read out the same way.
type Receiver struct {
	ID string
	// Stalled receivers never read after their Hello (the slow target).
	Stalled bool
	// Frames, when set, sees every frame after it is applied; set it before Run.
	Frames func(*statecastv1.SubscribeResponse)

	mu      sync.Mutex
	got     []Delivery
	batches int // batch frames received
}

// Count is the number of entries applied so far.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Deliveries returns a copy of what the receiver applied, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

func (r *Receiver) record(d Delivery) {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
}

// Run subscribes with hello and receives until ctx ends or the stream does; it returns nil
// then, and the error of any other failure.
func (r *Receiver) Run(ctx context.Context, cli statecastv1.PlayerClient, hello *statecastv1.Hello) error {
	st, err := cli.Subscribe(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return err
	}
	if r.Stalled {
		<-ctx.Done()
		return nil
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ack := r.apply(resp); ack >= -1 {
			if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: ack}}}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// apply records a frame's entries and returns the index to acknowledge (below -1:
// nothing).
func (r *Receiver) apply(resp *statecastv1.SubscribeResponse) int64 {
	now := time.Now().UnixNano()
	ack := int64(-2) // below any index: nothing to acknowledge
	switch m := resp.GetMsg().(type) {
	case *statecastv1.SubscribeResponse_Batch:
		r.mu.Lock()
		r.batches++
		for _, e := range m.Batch.GetEntries() {
			r.got = append(r.got, Delivery{Index: e.GetIndex(), Stamp: stampNanos(e.GetValue()), Applied: now})
			ack = e.GetIndex()
		}
		r.mu.Unlock()
	case *statecastv1.SubscribeResponse_Progress:
		ack = m.Progress.GetIndex()
	case *statecastv1.SubscribeResponse_SnapshotEnd:
		ack = m.SnapshotEnd.GetIndex()
	}
	if r.Frames != nil {
		r.Frames(resp)
	}
	return ack
}

// dial opens n loopback client connections to addr.
func dial(addr string, n int) ([]*grpc.ClientConn, error) {
	var out []*grpc.ClientConn
	for range n {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			for _, c := range out {
				_ = c.Close()
			}
			return nil, err
		}
		out = append(out, cc)
	}
	return out, nil
}

// Latencies returns, for the deliveries with index >= from (after the warm-up), stamp →
// applied, and, when acks is not nil, acknowledged-by-Kafka → applied with the count of
// deliveries whose acknowledgement was not logged.
func Latencies(rs []*Receiver, from int64, acks *AckLog) (stamped, acked []time.Duration, missingAck int) {
	for _, r := range rs {
		r.mu.Lock()
		for _, d := range r.got {
			if d.Index < from {
				continue
			}
			stamped = append(stamped, time.Duration(d.Applied-d.Stamp))
			if acks != nil {
				if t, ok := acks.Get(d.Index); ok {
					acked = append(acked, time.Duration(d.Applied-t.UnixNano()))
				} else {
					missingAck++
				}
			}
		}
		r.mu.Unlock()
	}
	return stamped, acked, missingAck
}

// DispatchSpans returns dispatch → applied for the deliveries with index >= from, the
// dispatch times (unix ns) given by index; deliveries without one are left out.
func DispatchSpans(rs []*Receiver, dispatched map[int64]int64, from int64) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		r.mu.Lock()
		for _, d := range r.got {
			if at, ok := dispatched[d.Index]; ok && d.Index >= from {
				out = append(out, time.Duration(d.Applied-at))
			}
		}
		r.mu.Unlock()
	}
	return out
}

// PerFrame is the mean number of entries per batch frame the receivers got.
func PerFrame(rs []*Receiver) float64 {
	var e, f int
	for _, r := range rs {
		r.mu.Lock()
		e, f = e+len(r.got), f+r.batches
		r.mu.Unlock()
	}
	if f == 0 {
		return 0
	}
	return float64(e) / float64(f)
}

// AllHave reports whether every receiver that is not stalled applied at least n entries.
func AllHave(rs []*Receiver, n int) bool {
	for _, r := range rs {
		if !r.Stalled && r.Count() < n {
			return false
		}
	}
	return true
}

// Receivers are n receivers subscribed to a player at an address (one not in this
// process: Player.Connect serves the in-process one), spread over client connections.
type Receivers struct {
	Recv   []*Receiver
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn
}

// ConnectReceivers subscribes n receivers to the player at addr, receiver i with
// hello(i), over conns connections; Close ends them.
func ConnectReceivers(addr string, n, conns int, hello func(i int, id string) *statecastv1.Hello) (*Receivers, error) {
	cs, err := dial(addr, max(conns, 1))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &Receivers{cancel: cancel, conns: cs}
	for i := range n {
		r := &Receiver{ID: "t" + strconv.Itoa(i)}
		h := hello(i, r.ID)
		cli := statecastv1.NewPlayerClient(cs[i%len(cs)])
		rs.Recv = append(rs.Recv, r)
		rs.wg.Go(func() { _ = r.Run(ctx, cli, h) })
	}
	return rs, nil
}

// Close ends the receivers' streams and closes their connections.
func (rs *Receivers) Close() {
	rs.cancel()
	rs.wg.Wait()
	for _, c := range rs.conns {
		_ = c.Close()
	}
}

// ConnectManyReceivers is ConnectReceivers with the receivers as channels of SubscribeMany
// streams, one stream per connection: receiver i is channel i/conns+1 of the stream of
// connection i%conns. Each stream has one goroutine here, which applies every channel's
// frames and sends their acks.
func ConnectManyReceivers(addr string, n, conns int, hello func(i int, id string) *statecastv1.Hello) (*Receivers, error) {
	cs, err := dial(addr, max(conns, 1))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &Receivers{cancel: cancel, conns: cs}
	rs.Recv = make([]*Receiver, n)
	for i := range n {
		rs.Recv[i] = &Receiver{ID: "t" + strconv.Itoa(i)}
	}
	for c, cc := range cs {
		st, err := statecastv1.NewPlayerClient(cc).SubscribeMany(ctx)
		if err != nil {
			rs.Close()
			return nil, err
		}
		chans := map[uint32]*Receiver{}
		for i := c; i < n; i += len(cs) {
			ch := uint32(i/len(cs) + 1)
			chans[ch] = rs.Recv[i]
			h := hello(i, rs.Recv[i].ID)
			if err := st.Send(&statecastv1.SubscribeManyRequest{Channel: ch, Request: &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: h}}}); err != nil {
				rs.Close()
				return nil, err
			}
		}
		rs.wg.Go(func() {
			for {
				resp, err := st.Recv()
				if err != nil {
					return
				}
				r := chans[resp.GetChannel()]
				if r == nil || resp.GetResponse() == nil {
					continue // a channel's end: its receiver stops counting
				}
				if ack := r.apply(resp.GetResponse()); ack >= -1 {
					if st.Send(&statecastv1.SubscribeManyRequest{Channel: resp.GetChannel(),
						Request: &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: ack}}}}) != nil {
						return
					}
				}
			}
		})
	}
	return rs, nil
}
