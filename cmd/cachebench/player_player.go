package main

// The player under test, in process: player.New + Run + Serve on loopback, with in-process
// receivers as targets (each one Subscribe stream, acking like cacheclient) recorded by the
// delivery checker.

import (
	"context"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/player"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

type playerRun struct {
	p       *player.Player
	reg     *prometheus.Registry
	topic   string
	brokers []string
	conns   []*grpc.ClientConn
	recv    []*receiver
	chk     *checker.Checker
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	ctx     context.Context
	runErr  chan error
	// dispatched records the player's dispatch time of each index (WithDispatchHook).
	dmu        sync.Mutex
	dispatched map[int64]int64
	// hold, when set, stops the main fetcher at its next dispatch until the channel is
	// closed (holdDispatch): the log can then be filled before the player fans it out.
	hold atomic.Pointer[chan struct{}]
}

func startPlayer(brokers []string, topic string, tweak func(*player.Config)) (*playerRun, error) {
	cfg := player.Config{Brokers: brokers, Streams: []player.StreamConfig{{Name: topic}}}
	if tweak != nil {
		tweak(&cfg)
	}
	reg := prometheus.NewRegistry()
	pr := &playerRun{reg: reg, topic: topic, brokers: brokers, chk: checker.New(), runErr: make(chan error, 1),
		dispatched: map[int64]int64{}}
	p, err := player.New(cfg, player.WithRegisterer(reg), player.WithDispatchHook(pr.onDispatch))
	if err != nil {
		return nil, err
	}
	pr.p = p
	pr.ctx, pr.cancel = context.WithCancel(context.Background())
	go func() { pr.runErr <- p.Run(pr.ctx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pr.close()
		return nil, err
	}
	go func() { _ = p.Serve(lis) }()
	ctx, cancel := context.WithTimeout(pr.ctx, 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		pr.close()
		return nil, fmt.Errorf("player not ready: %w", err)
	}
	if pr.conns, err = dial(lis.Addr().String(), 1); err != nil {
		pr.close()
		return nil, err
	}
	return pr, nil
}

// connect adds n targets over nconns client connections, resuming from the current end of
// the log (so they start in N at the head); views(i) gives target i's views, stalled(i)
// makes target i never read.
func (pr *playerRun) connect(n, nconns int, views func(int) []string, stalled func(int) bool) error {
	end, err := endOffset(pr.brokers, pr.topic)
	if err != nil {
		return err
	}
	addr := pr.conns[0].Target()
	for len(pr.conns) < nconns {
		cs, err := dial(addr, 1)
		if err != nil {
			return err
		}
		pr.conns = append(pr.conns, cs...)
	}
	for i := range n {
		r := &receiver{id: "t" + strconv.Itoa(len(pr.recv))}
		if stalled != nil {
			r.stalled = stalled(i)
		}
		hello := &statecastv1.Hello{ClientId: r.id, Stream: pr.topic, ResumeIndex: proto.Int64(end - 1)}
		if views != nil {
			hello.Views = views(i)
		}
		if !r.stalled {
			pr.chk.HelloMsg(hello)
			id := r.id
			r.frames = func(resp *statecastv1.SubscribeResponse) { pr.chk.Response(id, resp) }
		}
		pr.recv = append(pr.recv, r)
		cli := statecastv1.NewPlayerClient(pr.conns[i%len(pr.conns)])
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			_ = r.run(pr.ctx, cli, hello)
		}()
	}
	// Admitted targets show up on the status page.
	if !waitFor(2*time.Minute, func() bool {
		st := pr.p.Status()
		c := 0
		for _, s := range st.Streams {
			c += len(s.Targets)
		}
		return c >= len(pr.recv)
	}) {
		return fmt.Errorf("%d targets not admitted within 2 minutes", len(pr.recv))
	}
	return nil
}

func (pr *playerRun) onDispatch(_ string, index int64, at time.Time) {
	if h := pr.hold.Load(); h != nil {
		<-*h
		at = time.Now()
	}
	pr.dmu.Lock()
	pr.dispatched[index] = at.UnixNano()
	pr.dmu.Unlock()
}

// holdDispatch makes the main fetcher wait at its next dispatch (in WithDispatchHook, so
// nothing is pushed to a target) until release is called; release returns when it let
// the fetcher go.
func (pr *playerRun) holdDispatch() (release func()) {
	ch := make(chan struct{})
	pr.hold.Store(&ch)
	return func() {
		pr.hold.Store(nil)
		close(ch)
	}
}

// dispatchLatencies returns dispatch → applied for the deliveries with index >= from
// (the player's dispatch time, from WithDispatchHook): the span the bare fan-out measures.
func (pr *playerRun) dispatchLatencies(from int64) []time.Duration {
	pr.dmu.Lock()
	defer pr.dmu.Unlock()
	return dispatchSpans(pr.recv, pr.dispatched, from)
}

// recoveries sums the targets' budget overflows and recovery fetchers started.
func (pr *playerRun) recoveries() (overflows, recoveries int) {
	for _, s := range pr.p.Status().Streams {
		for _, t := range s.Targets {
			overflows += t.Overflows
			recoveries += t.Recoveries
		}
	}
	return overflows, recoveries
}

// check reads the topic and runs the delivery checker over every non-stalled target.
func (pr *playerRun) check() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	truth, err := checker.ReadTopic(ctx, pr.brokers, pr.topic)
	if err != nil {
		return err
	}
	// The targets joined at the head: records before their resume index are not theirs.
	return pr.chk.Check(truth)
}

func (pr *playerRun) close() {
	pr.cancel()
	_ = pr.p.Close()
	pr.wg.Wait()
	for _, c := range pr.conns {
		_ = c.Close()
	}
}

// histogram reads a player histogram (summed over label sets): mean and quantiles
// interpolated within buckets.
type histogram struct {
	count          uint64
	mean, p50, p99 time.Duration
}

func (pr *playerRun) histogram(name string) histogram {
	mfs, err := pr.reg.Gather()
	if err != nil {
		return histogram{}
	}
	var h histogram
	var sum float64
	bounds := map[float64]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			hh := m.GetHistogram()
			h.count += hh.GetSampleCount()
			sum += hh.GetSampleSum()
			for _, b := range hh.GetBucket() {
				bounds[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	if h.count == 0 {
		return h
	}
	h.mean = time.Duration(sum / float64(h.count) * 1e9)
	var ubs []float64
	for ub := range bounds {
		ubs = append(ubs, ub)
	}
	sort.Float64s(ubs)
	q := func(p float64) time.Duration {
		rank := p * float64(h.count)
		prevUB, prevC := 0.0, uint64(0)
		for _, ub := range ubs {
			c := bounds[ub]
			if float64(c) >= rank {
				frac := (rank - float64(prevC)) / math.Max(1, float64(c-prevC))
				return time.Duration((prevUB + frac*(ub-prevUB)) * 1e9)
			}
			prevUB, prevC = ub, c
		}
		return time.Duration(prevUB * 1e9)
	}
	h.p50, h.p99 = q(0.5), q(0.99)
	return h
}
