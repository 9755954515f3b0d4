package player

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestSessionsRandomized drives the real admission (snapshot bootstrap, resume with
// recovery, replacement of a connection), dispatcher, queues and sender — without Kafka:
// records are applied directly and recovery reads the in-memory history — with targets
// that disconnect at random (some forgetting their state) while records (rows, tombstones,
// control records) are dispatched, under a tiny budget. The delivery checker judges every
// frame against the records.
func TestSessionsRandomized(t *testing.T) {
	for seed := range uint64(6) {
		// In a synctest bubble the pauses, the progress ticker and the time-outs are
		// virtual: a paused goroutine still lets the others run ahead of it (the clock moves
		// only once all wait), so the overflows and recoveries happen as on a real clock.
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { sessionsRun(t, seed) })
		})
	}
}

func sessionsRun(t *testing.T, seed uint64) {
	p, err := New(Config{
		Insecure: true,
		Kafka:    kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}},
		TargetBudgetBytes: 16 << 10, MaxBatchBytes: 2 << 10, MaxBatchEntries: 8,
		ProgressInterval: time.Millisecond, AckTimeout: time.Minute, HistoryBytes: 1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	var end atomic.Int64
	s.offsetsHook = func() (int64, int64, error) { return 0, end.Load(), nil }
	s.markReady(0, 0)
	pctx, pcancel := context.WithCancel(context.Background())
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); s.progressLoop(pctx) }() // Run would start it
	defer func() { pcancel(); <-progressDone }()

	var truth []checker.Record
	var off int64 = -1
	prnd := rand.New(rand.NewPCG(seed, 1))
	views := []string{"a", "b", "c"}
	produce := func(n int) {
		for range n {
			off += 1 + int64(prnd.IntN(2))
			v := views[prnd.IntN(len(views))]
			kind, key := record.KindRow, record.EncodeKey(v, fmt.Sprint(prnd.IntN(15)))
			value := make([]byte, 50+prnd.IntN(300))
			switch r := prnd.IntN(10); {
			case r == 0:
				kind, key, value = record.KindPoll, record.ControlKey(v, record.KindPoll), []byte("{}")
			case r < 3:
				value = nil
			}
			pm := recordsarama.ProducerMessage("t", key, value, record.Meta{View: v, Kind: kind})
			m := &sarama.ConsumerMessage{Offset: off, Key: key, Value: value, Timestamp: time.Now()}
			for _, h := range pm.Headers {
				m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
			}
			truth = append(truth, checker.Record{Index: off, Key: string(key), View: v, Kind: string(kind), Tombstone: value == nil})
			woken := map[*target]struct{}{}
			s.apply(m, true, woken)
			end.Store(off + 1)
			for t := range woken {
				t.signal()
			}
		}
	}
	produce(100)

	chk := checker.New()
	type cl struct {
		id       string
		views    []string
		applied  int64
		hasState bool
		sessions int
	}
	clients := []*cl{{id: "all", applied: -1}, {id: "a", views: []string{"a"}, applied: -1}, {id: "bc", views: []string{"b", "c"}, applied: -1}}
	var finalOff atomic.Int64
	finalOff.Store(-1)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(10+i)))
			for {
				fin := finalOff.Load()
				if fin >= 0 && c.hasState && c.applied >= fin {
					return
				}
				// One session: Hello, frames until a random cut (or the end), then gone.
				h := &statecastv1.Hello{ClientId: c.id, Stream: "s", Views: c.views}
				var resume *int64
				if c.hasState {
					r := c.applied
					resume, h.ResumeIndex = &r, &r
				}
				chk.Hello(c.id, c.views, resume)
				c.sessions++
				tg, err := s.admit(identity{instance: c.id, service: c.id}, h, nil)
				if err != nil {
					t.Errorf("admit: %v", err)
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				fs := &fakeStream{ctx: ctx, frames: make(chan *statecastv1.SubscribeResponse)}
				tg.startSending(fs)
				cut := 5 + rnd.IntN(60)
				inSnap := false
				for n := 0; ; n++ {
					if fin := finalOff.Load(); n >= cut && (fin < 0 || rnd.IntN(3) > 0) {
						break
					}
					if fin := finalOff.Load(); fin >= 0 && c.hasState && !inSnap && c.applied >= fin {
						break
					}
					var r *statecastv1.SubscribeResponse
					select {
					case r = <-fs.frames:
					case <-time.After(200 * time.Millisecond):
						continue
					}
					ack := int64(-2)
					switch m := r.Msg.(type) {
					case *statecastv1.SubscribeResponse_Batch:
						es := make([]checker.Entry, len(m.Batch.Entries))
						for i, e := range m.Batch.Entries {
							es[i] = checker.Entry{Index: e.Index, Key: string(e.Key), View: e.View, Kind: kindString(e.Kind), Tombstone: e.Tombstone}
						}
						chk.Batch(c.id, es)
						if !inSnap {
							c.applied, ack = es[len(es)-1].Index, es[len(es)-1].Index
						}
					case *statecastv1.SubscribeResponse_Progress:
						chk.Progress(c.id, m.Progress.Index)
						c.applied, ack = max(c.applied, m.Progress.Index), max(c.applied, m.Progress.Index)
					case *statecastv1.SubscribeResponse_SnapshotBegin:
						chk.SnapshotBegin(c.id, m.SnapshotBegin.Index, m.SnapshotBegin.Views)
						inSnap = true
					case *statecastv1.SubscribeResponse_SnapshotEnd:
						chk.SnapshotEnd(c.id, m.SnapshotEnd.Index)
						inSnap = false
						c.applied, c.hasState, ack = m.SnapshotEnd.Index, true, m.SnapshotEnd.Index
					case *statecastv1.SubscribeResponse_ResyncRequired:
						chk.Resync(c.id, m.ResyncRequired.Reason.String())
					}
					if ack >= -1 {
						tg.mu.Lock() // the receiver's ack handling
						if ack > tg.lastAck {
							tg.lastAck = ack
						}
						tg.lastAckAt = time.Now()
						tg.q.ack(ack)
						tg.mu.Unlock()
						tg.signal()
					}
				}
				cancel()
				waitSender(t, tg)
				s.remove(tg)
				if rnd.IntN(8) == 0 {
					c.hasState, c.applied = false, -1 // lost its state: bootstraps again
				}
			}
		}()
	}
	for range 8 {
		produce(50 + prnd.IntN(150))
		time.Sleep(time.Duration(prnd.IntN(3000)) * time.Microsecond) // pacing
	}
	finalOff.Store(off)
	wg.Wait()
	for _, c := range clients {
		t.Logf("client %s: %d sessions, applied %d of %d", c.id, c.sessions, c.applied, off)
	}
	if err := chk.Check(truth); err != nil {
		t.Fatal(err)
	}
}
