package main

// Shared pieces of the player benchmarks (issue 3 §6): latency summaries, timestamped
// payloads, pacing, topics, a producer that records when each record was acknowledged,
// and the in-process gRPC receiver used for the player and for the bare fan-out.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// summary of a latency sample.
type summary struct {
	n             int
	avg, p50, p99 time.Duration
	max           time.Duration
}

func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return summary{n: len(s), avg: sum / time.Duration(len(s)), p50: q(0.50), p99: q(0.99), max: s[len(s)-1]}
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }

func (s summary) String() string {
	if s.n == 0 {
		return "n=0"
	}
	return fmt.Sprintf("avg %s  p50 %s  p99 %s  max %s ms (n=%d)", ms(s.avg), ms(s.p50), ms(s.p99), ms(s.max), s.n)
}

// payload returns a JSON row of exactly size bytes (at least 40) carrying stamp in
// nanoseconds at a fixed position, so a receiver reads it without a JSON decoder.
func payload(size int, stamp time.Time) []byte {
	b := make([]byte, 0, size)
	b = append(b, `{"t":`...)
	b = append(b, fmt.Sprintf("%019d", stamp.UnixNano())...)
	b = append(b, `,"p":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// stampOf reads the stamp written by payload.
func stampOf(v []byte) (time.Time, bool) {
	if len(v) < 24 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(string(v[5:24]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// pace calls f(i) for i = 0.. at rate per second until ctx ends or f returns false.
// When behind it catches up without sleeping (no coordinated omission by skipping).
func pace(ctx context.Context, rate int, f func(i int) bool) {
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for i := 0; ; i++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			return
		}
		if !f(i) {
			return
		}
		next = next.Add(interval)
	}
}

// newTopic creates a unique one-partition compacted topic and returns its name and a
// function deleting it.
func newTopic(brokers []string, prefix string) (string, func(), error) {
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("cachebench"))
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	compact := "compact"
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		admin.Close()
		return "", nil, err
	}
	return name, func() { _ = admin.DeleteTopic(name); admin.Close() }, nil
}

// ackLog records when the producer got the acknowledgement of each offset.
type ackLog struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (a *ackLog) set(off int64, t time.Time) {
	a.mu.Lock()
	a.at[off] = t
	a.mu.Unlock()
}

func (a *ackLog) get(off int64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[off]
	return t, ok
}

// producer writes statecast rows (all five headers) with the idempotent, ordered settings
// of the distributor, asynchronously, and logs the acknowledgement time per offset.
type producer struct {
	ap    sarama.AsyncProducer
	topic string
	acks  *ackLog
	done  chan struct{}
	err   error
	meta  record.Meta
}

func newProducer(brokers []string, topic string) (*producer, error) {
	cfg := kafkaconn.ProducerConfig("cachebench-producer")
	cfg.Producer.Flush.Frequency = 0
	ap, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		return nil, err
	}
	p := &producer{ap: ap, topic: topic, acks: &ackLog{at: map[int64]time.Time{}}, done: make(chan struct{}),
		meta: record.Meta{Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/0"}}
	go func() {
		defer close(p.done)
		succ, errs := ap.Successes(), ap.Errors()
		for succ != nil || errs != nil {
			select {
			case m, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				p.acks.set(m.Offset, time.Now())
			case e, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				if p.err == nil {
					p.err = e.Err
				}
			}
		}
	}()
	return p, nil
}

// send queues one row of view with key k and a payload of size bytes stamped now.
func (p *producer) send(view string, k int, size int) {
	m := p.meta
	m.View = view
	p.ap.Input() <- recordsarama.ProducerMessage(p.topic, record.EncodeKey(view, strconv.Itoa(k)), payload(size, time.Now()), m)
}

// close flushes and stops the producer.
func (p *producer) close() error {
	p.ap.AsyncClose()
	<-p.done
	return p.err
}

// endOffset returns the high-water mark of partition 0.
func endOffset(brokers []string, topic string) (int64, error) {
	c, err := sarama.NewClient(brokers, kafkaconn.NewConfig("cachebench"))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.GetOffset(topic, 0, sarama.OffsetNewest)
}

// delivery is one entry applied by a receiver.
type delivery struct {
	index   int64
	stamp   int64 // payload stamp (dispatch time for the bare fan-out, produce time otherwise)
	applied int64 // when the receiver had it
}

// receiver is one in-process target: a gRPC Subscribe stream that applies every entry
// (records its arrival), acks cumulatively after each frame like cacheclient, and
// optionally hands each frame to a hook (the delivery checker).
type receiver struct {
	id      string
	mu      sync.Mutex
	got     []delivery
	batches int // batch frames received
	last    int64
	frames  func(*statecastv1.SubscribeResponse)
	stalled bool // never reads after Hello (the slow target)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) run(ctx context.Context, cli statecastv1.PlayerClient, hello *statecastv1.Hello) error {
	st, err := cli.Subscribe(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return err
	}
	if r.stalled {
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
		now := time.Now().UnixNano()
		ack := int64(-2)
		switch m := resp.GetMsg().(type) {
		case *statecastv1.SubscribeResponse_Batch:
			r.mu.Lock()
			r.batches++
			for _, e := range m.Batch.GetEntries() {
				var stamp int64
				if ts, ok := stampOf(e.GetValue()); ok {
					stamp = ts.UnixNano()
				}
				r.got = append(r.got, delivery{index: e.GetIndex(), stamp: stamp, applied: now})
				ack = e.GetIndex()
			}
			r.mu.Unlock()
		case *statecastv1.SubscribeResponse_Progress:
			ack = m.Progress.GetIndex()
		case *statecastv1.SubscribeResponse_SnapshotEnd:
			ack = m.SnapshotEnd.GetIndex()
		}
		if r.frames != nil {
			r.frames(resp)
		}
		if ack >= -1 {
			if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: ack}}}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// dial opens n loopback client connections to addr.
func dial(addr string, n int) ([]*grpc.ClientConn, error) {
	var out []*grpc.ClientConn
	for range n {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		out = append(out, cc)
	}
	return out, nil
}

// waitFor polls cond every 2ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}
