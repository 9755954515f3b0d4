package bench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// Player is the player under test, in process: player.New + Run + Serve on loopback, with
// in-process receivers as targets (each one Subscribe stream, acking like cacheclient)
// recorded by the delivery checker.
type Player struct {
	P    *player.Player
	Recv []*Receiver

	reg     *prometheus.Registry
	topic   string
	brokers []string
	conns   []*grpc.ClientConn
	chk     *checker.Checker
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	// dispatched records the player's dispatch time of each index (WithDispatchHook).
	dmu        sync.Mutex
	dispatched map[int64]int64
	// hold, when set, stops the main fetcher at its next dispatch until the channel is
	// closed (HoldDispatch): the log can then be filled before the player fans it out.
	hold atomic.Pointer[chan struct{}]
}

// StartPlayer runs a player serving topic on loopback and waits until it is ready; tweak,
// when not nil, adjusts its config.
func StartPlayer(brokers []string, topic string, tweak func(*player.Config)) (*Player, error) {
	// Views "*": the targets subscribe before their views have records in the topic.
	cfg := player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: brokers}, Streams: []player.StreamConfig{{Name: topic, Views: []string{"*"}}}}
	if tweak != nil {
		tweak(&cfg)
	}
	pr := &Player{reg: prometheus.NewRegistry(), topic: topic, brokers: brokers, chk: checker.New(),
		dispatched: map[int64]int64{}}
	p, err := player.New(cfg, player.WithRegisterer(pr.reg), player.WithDispatchHook(pr.onDispatch))
	if err != nil {
		return nil, err
	}
	pr.P = p
	pr.ctx, pr.cancel = context.WithCancel(context.Background())
	go func() { _ = p.Run(pr.ctx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pr.Close()
		return nil, err
	}
	go func() { _ = p.Serve(lis) }()
	ctx, cancel := context.WithTimeout(pr.ctx, 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		pr.Close()
		return nil, fmt.Errorf("player not ready: %w", err)
	}
	if pr.conns, err = dial(lis.Addr().String(), 1); err != nil {
		pr.Close()
		return nil, err
	}
	return pr, nil
}

// Addr is the player's gRPC address (for clients other than the receivers).
func (pr *Player) Addr() string { return pr.conns[0].Target() }

// Targets describes the targets Connect adds.
type Targets struct {
	N     int // targets
	Conns int // client connections carrying them (at least 1)
	// Views(i), when set, gives target i's views (nil: every view).
	Views func(i int) []string
	// Stalled(i), when set, makes target i never read.
	Stalled func(i int) bool
	// Unchecked leaves the targets out of the delivery checker (whose records would
	// dominate the heap of a benchmark with many targets).
	Unchecked bool
}

// Connect adds targets resuming from the current end of the log (so they start in N at
// the head) and returns once the player admitted them all.
func (pr *Player) Connect(t Targets) error {
	end, err := EndOffset(pr.brokers, pr.topic)
	if err != nil {
		return err
	}
	addr := pr.conns[0].Target()
	for len(pr.conns) < t.Conns {
		cs, err := dial(addr, 1)
		if err != nil {
			return err
		}
		pr.conns = append(pr.conns, cs...)
	}
	for i := range t.N {
		r := &Receiver{ID: "t" + strconv.Itoa(len(pr.Recv))}
		if t.Stalled != nil {
			r.Stalled = t.Stalled(i)
		}
		hello := &statecastv1.Hello{ClientId: r.ID, Stream: pr.topic, ResumeIndex: proto.Int64(end - 1)}
		if t.Views != nil {
			hello.Views = t.Views(i)
		}
		if !r.Stalled && !t.Unchecked {
			pr.chk.HelloMsg(hello)
			id := r.ID
			r.Frames = func(resp *statecastv1.SubscribeResponse) { pr.chk.Response(id, resp) }
		}
		pr.Recv = append(pr.Recv, r)
		cli := statecastv1.NewPlayerClient(pr.conns[i%len(pr.conns)])
		pr.wg.Go(func() { _ = r.Run(pr.ctx, cli, hello) })
	}
	// Admitted targets show up on the status page.
	if !WaitFor(2*time.Minute, func() bool {
		c := 0
		for _, s := range pr.P.Status().Streams {
			c += len(s.Targets)
		}
		return c >= len(pr.Recv)
	}) {
		return fmt.Errorf("%d targets not admitted within 2 minutes", len(pr.Recv))
	}
	return nil
}

func (pr *Player) onDispatch(_ string, index int64, at time.Time) {
	if h := pr.hold.Load(); h != nil {
		<-*h
		at = time.Now()
	}
	pr.dmu.Lock()
	pr.dispatched[index] = at.UnixNano()
	pr.dmu.Unlock()
}

// HoldDispatch makes the main fetcher wait at its next dispatch (in WithDispatchHook, so
// nothing is pushed to a target) until release is called; release lets the fetcher go
// and may be called more than once.
func (pr *Player) HoldDispatch() (release func()) {
	ch := make(chan struct{})
	pr.hold.Store(&ch)
	return sync.OnceFunc(func() {
		pr.hold.Store(nil)
		close(ch)
	})
}

// DispatchLatencies returns dispatch → applied for the deliveries with index >= from
// (the player's dispatch time, from WithDispatchHook): the span the bare fan-out measures.
func (pr *Player) DispatchLatencies(from int64) []time.Duration {
	pr.dmu.Lock()
	defer pr.dmu.Unlock()
	return DispatchSpans(pr.Recv, pr.dispatched, from)
}

// Recoveries sums the targets' budget overflows and recovery fetchers started.
func (pr *Player) Recoveries() (overflows, recoveries int) {
	for _, s := range pr.P.Status().Streams {
		for _, t := range s.Targets {
			overflows += t.Overflows
			recoveries += t.Recoveries
		}
	}
	return overflows, recoveries
}

// Check reads the topic and runs the delivery checker over every checked target.
func (pr *Player) Check() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	truth, err := checker.ReadTopic(ctx, pr.brokers, pr.topic)
	if err != nil {
		return err
	}
	// The targets joined at the head: their resume index excludes the earlier records.
	return pr.chk.Check(truth)
}

// CheckVerdict is the delivery checker's result as printed on one line.
func CheckVerdict(err error) string {
	if err == nil {
		return "ok (ordered, unique, reliable, resumable)"
	}
	return "VIOLATIONS: " + strings.ReplaceAll(err.Error(), "\n", " | ")
}

// Histogram reads one of the player's histograms (HistogramOf).
func (pr *Player) Histogram(name string) Histogram { return HistogramOf(pr.reg, name) }

// Close stops the player and the receivers and waits for them.
func (pr *Player) Close() {
	pr.cancel()
	if pr.P != nil {
		_ = pr.P.Close()
	}
	pr.wg.Wait()
	for _, c := range pr.conns {
		_ = c.Close()
	}
}
