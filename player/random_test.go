package player

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// fakeStream is the server side of a Subscribe stream: it hands every frame the sender
// writes to a channel.
type fakeStream struct {
	grpc.ServerStream
	ctx    context.Context
	frames chan *statecastv1.SubscribeResponse
}

func (f *fakeStream) Context() context.Context { return f.ctx }
func (f *fakeStream) Send(*statecastv1.SubscribeResponse) error {
	panic("the player sends raw frames")
}
func (f *fakeStream) Recv() (*statecastv1.SubscribeRequest, error) { panic("unused") }
func (f *fakeStream) SendMsg(m any) error {
	var r statecastv1.SubscribeResponse
	bs, err := newCodec().Marshal(m)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(bs.Materialize(), &r); err != nil {
		return err
	}
	select {
	case f.frames <- &r:
		return nil
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
}

// TestTargetRandomized drives the real dispatcher (stream.apply), target queue, recovery
// sources (from the in-memory history) and sender against a slow, jittery consumer with a
// tiny budget, so that targets overflow in N, RF and FC again and again; every run checks
// in-order, no-duplicate, complete delivery of the target's views after its resume index
// (the safety and liveness properties of the paper's model), for random resume points.
func TestTargetRandomized(t *testing.T) {
	for seed := range uint64(16) {
		// In a synctest bubble the pauses, the progress ticker and the time-outs are
		// virtual: a paused goroutine still lets the others run ahead of it (the clock moves
		// only once all wait), so the overflows and recoveries happen as on a real clock.
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRun(t, seed) })
		})
	}
}

func randomRun(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 99))
	p, err := New(Config{
		Insecure: true,
		Kafka:    kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}},
		TargetBudgetBytes: 8 << 10, MaxBatchBytes: 1 << 10, MaxBatchEntries: 4,
		ProgressInterval: time.Millisecond, AckTimeout: time.Minute, HistoryBytes: 1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	s.markReady(0, 0)
	views := []string{"a", "b", "c"}
	var off int64
	var truth []*sarama.ConsumerMessage
	prnd := rand.New(rand.NewPCG(seed, 98)) // the producer's own source (it runs concurrently)
	produce := func(n int) {
		for range n {
			off += 1 + int64(prnd.IntN(3)) // gaps
			v := views[prnd.IntN(len(views))]
			pm := recordsarama.ProducerMessage("t", record.EncodeKey(v, fmt.Sprint(prnd.IntN(20))), make([]byte, 100+prnd.IntN(200)), record.Meta{View: v, Kind: record.KindRow})
			m := &sarama.ConsumerMessage{Offset: off, Key: []byte(pm.Key.(sarama.ByteEncoder)), Value: []byte(pm.Value.(sarama.ByteEncoder)), Timestamp: time.Now()}
			for _, h := range pm.Headers {
				m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
			}
			truth = append(truth, m)
			s.apply(m, true, map[*target]struct{}{})
		}
		s.mu.Lock()
		for t := range s.allViews {
			t.signal()
		}
		for _, m := range s.byView {
			for t := range m {
				t.signal()
			}
		}
		s.mu.Unlock()
	}
	produce(200)

	// The target: views {a, b}, resuming from a random index (admit's recovery path).
	resume := rnd.Int64N(off + 1)
	want := map[string]bool{"a": true, "b": true}
	s.mu.Lock()
	ci := s.current.Load()
	tg := newTarget(s, "r", []string{"a", "b"}, 1, StateRF, p.cfg.MaxBatchEntries, p.cfg.MaxBatchBytes)
	tg.lastAck, tg.sentUpTo = resume, resume
	tg.mu.Lock()
	if resume >= ci {
		tg.q.state, tg.recEnd = StateN, resume
	} else {
		tg.startRecoveryLocked(resume+1, ci)
	}
	tg.mu.Unlock()
	s.byClient[tg.id] = tg
	s.register(tg)
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	fs := &fakeStream{ctx: ctx, frames: make(chan *statecastv1.SubscribeResponse)}
	var wg sync.WaitGroup
	tg.startSending(fs)
	defer waitSender(t, tg)
	wg.Add(1)
	go func() { defer wg.Done(); s.progressLoop(ctx) }() // Run would start it

	var got []int64
	pos := resume
	// consume reads frames until the target has everything up to until (the last record
	// produced; progress frames cover a filtered tail).
	consume := func(until int64) {
		for pos < until {
			var r *statecastv1.SubscribeResponse
			select {
			case r = <-fs.frames:
			case <-time.After(30 * time.Second):
				tg.mu.Lock()
				t.Fatalf("stuck at %d (want %d): state %s normal %d catchup %d popped %d dropped %v", pos, until, tg.q.state, tg.q.normal.len(), tg.q.catchup.len(), len(tg.q.popped), tg.dropped)
			}
			switch m := r.Msg.(type) {
			case *statecastv1.SubscribeResponse_Batch:
				for _, e := range m.Batch.Entries {
					if e.Index <= pos {
						t.Fatalf("entry %d after %d (ordered/unique)", e.Index, pos)
					}
					got = append(got, e.Index)
					pos = e.Index
				}
			case *statecastv1.SubscribeResponse_Progress:
				if m.Progress.Index < pos {
					t.Fatalf("progress %d after %d", m.Progress.Index, pos)
				}
				pos = m.Progress.Index
			default:
				t.Fatalf("unexpected frame %v", r)
			}
			if rnd.IntN(4) == 0 {
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond) // a slow consumer
			}
			tg.mu.Lock() // the receiver's ack handling
			tg.lastAck, tg.lastAckAt = pos, time.Now()
			tg.q.ack(pos)
			tg.mu.Unlock()
			tg.signal()
		}
	}
	if seed%2 == 0 {
		// Bursts: the dispatcher outruns the consumer, overflows again and again.
		for range 5 {
			produce(100 + prnd.IntN(300))
			consume(off - int64(rnd.IntN(50)))
		}
		consume(off)
		cancel()
		wg.Wait()
		check(t, truth, resume, want, got, tg)
		return
	}
	// The dispatcher runs concurrently with the consumer.
	final := make(chan int64, 1)
	go func() {
		for range 6 {
			produce(50 + prnd.IntN(250))
			time.Sleep(time.Duration(prnd.IntN(2000)) * time.Microsecond) // pacing
		}
		final <- off
	}()
	consume(<-final)
	cancel()
	wg.Wait()

	check(t, truth, resume, want, got, tg)
}

// waitSender suspends tg and waits until no sender of it runs.
func waitSender(t *testing.T, tg *target) {
	t.Helper()
	tg.suspend(ErrSuspended)
	for deadline := time.Now().Add(10 * time.Second); tg.sending.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("the target's sender still runs 10 s after its suspension")
			return
		}
	}
}

func check(t *testing.T, truth []*sarama.ConsumerMessage, resume int64, want map[string]bool, got []int64, tg *target) {
	t.Helper()
	var exp []int64
	for _, m := range truth {
		meta, _ := recordsarama.Meta(m)
		if m.Offset > resume && want[meta.View] {
			exp = append(exp, m.Offset)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Fatalf("delivered %d entries, want %d\n got %v\nwant %v", len(got), len(exp), got, exp)
	}
	tg.mu.Lock()
	t.Logf("resume %d, %d entries, overflows %d, recoveries %d", resume, len(got), tg.overflows, tg.recoveries)
	tg.mu.Unlock()
}
