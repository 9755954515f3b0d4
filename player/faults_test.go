package player

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestPlayerRestart: the player is closed and a new one started (in-process) while
// targets are connected and records are produced; targets resume on the new player.
func TestPlayerRestart(t *testing.T) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(3, 4))
	e.produce(200, []string{"a", "b"}, 100, rnd)
	var cur atomic.Pointer[testPlayer]
	cur.Store(startPlayer(t, e, nil))
	clients := []*client{newClient("all", e.chk), newClient("a", e.chk, "a"), newClient("b-churn", e.chk, "b")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, t, c, func() string { return cur.Load().addr }, c.id == "b-churn", uint64(i))
		}()
	}
	for round := range 3 {
		for range 10 {
			e.produce(30, []string{"a", "b"}, 100, rnd)
			time.Sleep(10 * time.Millisecond) // pacing
		}
		old := cur.Load()
		old.stop() // targets end with Unavailable and reconnect to the next player
		cur.Store(startPlayer(t, e, nil))
		t.Logf("restart %d done", round+1)
	}
	e.produce(100, []string{"a", "b"}, 100, rnd)
	last := e.lastOffset()
	for _, c := range clients {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	e.check()
}

// TestFailoverTwoPlayers: two players serve the same stream; clients switch between them
// on every reconnect and resume exactly where they stopped.
func TestFailoverTwoPlayers(t *testing.T) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(5, 6))
	e.produce(200, []string{"a", "b"}, 100, rnd)
	p1, p2 := startPlayer(t, e, nil), startPlayer(t, e, nil)
	addrs := []string{p1.addr, p2.addr}
	clients := []*client{newClient("x", e.chk), newClient("y", e.chk, "a"), newClient("z", e.chk, "b")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		var n atomic.Int64
		go func() {
			defer wg.Done()
			runClient(ctx, t, c, func() string { return addrs[n.Add(1)%2] }, true, uint64(10+i))
		}()
	}
	for range 30 {
		e.produce(30, []string{"a", "b"}, 100, rnd)
		time.Sleep(10 * time.Millisecond) // pacing
	}
	last := e.lastOffset()
	for _, c := range clients {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	e.check()
}

// TestStalledTarget: a target that stops reading while a big backlog is produced does not
// slow the others, its memory stays within its budget (it leaves N for RF), and once it
// reads again it catches up from Kafka without being disconnected.
// With a tiny history the recovery reads Kafka; with the default one, memory.
func TestStalledTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int64
	}{{"recovery from memory", 0}, {"recovery from Kafka", 1}} {
		t.Run(tc.name, func(t *testing.T) { testStalledTarget(t, tc.history) })
	}
}

func testStalledTarget(t *testing.T, history int64) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(7, 8))
	const budget = 256 << 10
	tp := startPlayer(t, e, func(c *Config) { c.TargetBudgetBytes = budget; c.MaxBatchBytes = 16 << 10; c.HistoryBytes = history })
	fast := newClient("fast", e.chk)
	slow := newClient("slow", e.chk)
	slow.window = 64 << 10
	slow.batch = 64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); runClient(ctx, t, fast, func() string { return tp.addr }, false, 1) }()
	release := make(chan struct{})
	var slowFrames atomic.Int64
	var slowErr error
	go func() {
		defer wg.Done()
		slowErr = slow.session(ctx, tp.addr, 0, func() {
			if slowFrames.Add(1) == 3 {
				<-release // stall after two frames (the snapshot frames)
			}
		})
	}()
	waitFor(t, 30*time.Second, "slow target to stall", func() bool { return slowFrames.Load() >= 3 })
	for range 6 {
		e.produce(500, []string{"a", "b"}, 1000, rnd) // ~3 MB, 12x the budget
	}
	last := e.lastOffset()
	waitFor(t, 90*time.Second, "fast to reach the end while slow is stalled", func() bool { return fast.Applied() >= last })
	st := targetStatus(tp.p, "slow")
	t.Logf("stalled target: %+v", st)
	if st.State != "RF" && st.State != "FC" {
		t.Errorf("stalled target state %s, want RF or FC", st.State)
	}
	if st.Overflows == 0 {
		t.Errorf("stalled target never overflowed its budget")
	}
	if st.QueueBytes > budget {
		t.Errorf("stalled target holds %d bytes, budget %d", st.QueueBytes, budget)
	}
	close(release)
	waitFor(t, 90*time.Second, "slow to catch up", func() bool { return slow.Applied() >= last })
	waitFor(t, 30*time.Second, "slow back in N", func() bool { return targetStatus(tp.p, "slow").State == "N" })
	if st := targetStatus(tp.p, "slow"); st.Term != 1 {
		t.Errorf("slow target was reconnected (term %d); it should have recovered in place", st.Term)
	}
	cancel()
	wg.Wait()
	if slowErr != nil {
		t.Errorf("slow session: %v", slowErr)
	}
	e.check()
}

func targetStatus(p *Player, id string) TargetStatus {
	for _, s := range p.Status().Streams {
		for _, t := range s.Targets {
			if t.ID == id {
				return t
			}
		}
	}
	return TargetStatus{State: "absent"}
}

// TestBootstrapDuringHeavyWrites: new targets (no resume index) join while records are
// produced as fast as the producer goes; each gets a snapshot and then the live stream.
func TestBootstrapDuringHeavyWrites(t *testing.T) {
	e := newEnv(t, nil)
	rnd := rand.New(rand.NewPCG(9, 10))
	e.produce(1000, []string{"a", "b", "c"}, 200, rnd)
	tp := startPlayer(t, e, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		prnd := rand.New(rand.NewPCG(11, 12))
		for range 20 {
			e.produce(200, []string{"a", "b", "c"}, 200, prnd)
		}
	}()
	var clients []*client
	views := [][]string{nil, {"a"}, {"b", "c"}, {"c"}, nil, {"a", "b"}}
	for i, v := range views {
		c := newClient("new"+string(rune('0'+i)), e.chk, v...)
		clients = append(clients, c)
		wg.Add(1)
		go func() { defer wg.Done(); runClient(ctx, t, c, func() string { return tp.addr }, false, uint64(i)) }()
		time.Sleep(30 * time.Millisecond) // stagger the joins during the writes
	}
	<-prodDone
	last := e.lastOffset()
	for _, c := range clients {
		waitFor(t, 90*time.Second, c.id+" to reach the end", func() bool { return c.Applied() >= last })
	}
	cancel()
	wg.Wait()
	e.check()
}

// TestResyncRequired: a resume index below the log start (records deleted) gets
// ResyncRequired(BELOW_LOG_START) then a snapshot; one past the log end gets
// ResyncRequired(AHEAD_OF_LOG) then a snapshot.
func TestResyncRequired(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	e.chk = checker.New(checker.Options{AllowCompacted: true}) // records delivered before the deletion are gone from the truth
	rnd := rand.New(rand.NewPCG(13, 14))
	e.produce(200, []string{"a", "b"}, 100, rnd)
	tp := startPlayer(t, e, nil)
	below := newClient("below", e.chk, "a")
	ahead := newClient("ahead", e.chk)
	for _, c := range []*client{below, ahead} {
		sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= 199 })
	}
	e.produce(100, []string{"a", "b"}, 100, rnd)
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	tp.waitMain(t, e.lastOffset())
	if err := admin.DeleteRecords(e.topic, map[int32]int64{0: 250}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	ahead.mu.Lock()
	ahead.applied = 1_000_000
	ahead.mu.Unlock()
	e.produce(50, []string{"a", "b"}, 100, rnd)
	last := e.lastOffset()
	for _, c := range []*client{below, ahead} {
		sessionUntil(t, c, tp.addr, 60*time.Second, func() bool { a := c.Applied(); return a >= last && a < 1_000_000 })
	}
	if want := []statecastv1.ResyncRequired_Reason{statecastv1.ResyncRequired_REASON_BELOW_LOG_START}; !slices.Equal(below.resyncs, want) {
		t.Errorf("below: resyncs %v, want %v", below.resyncs, want)
	}
	if want := []statecastv1.ResyncRequired_Reason{statecastv1.ResyncRequired_REASON_AHEAD_OF_LOG}; !slices.Equal(ahead.resyncs, want) {
		t.Errorf("ahead: resyncs %v, want %v", ahead.resyncs, want)
	}
	e.check()
}

// TestResyncDuringRecovery: a stalled target recovering from Kafka finds the log start moved
// past its position (DeleteRecords while it was behind). It gets ResyncRequired
// (BELOW_LOG_START) and a snapshot on the same stream — no disconnect — and then the live
// entries.
func TestResyncDuringRecovery(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	e.chk = checker.New(checker.Options{AllowCompacted: true}) // records delivered before the deletion are gone from the truth
	rnd := rand.New(rand.NewPCG(15, 16))
	const budget = 256 << 10
	tp := startPlayer(t, e, func(c *Config) { c.TargetBudgetBytes = budget; c.MaxBatchBytes = 16 << 10; c.HistoryBytes = 1 })
	slow := newClient("slow", e.chk)
	slow.window = 64 << 10
	slow.batch = 64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var slowFrames atomic.Int64
	slowErr := make(chan error, 1)
	go func() {
		slowErr <- slow.session(ctx, tp.addr, 0, func() {
			if slowFrames.Add(1) == 3 {
				<-release // stall after the (empty) snapshot's frames
			}
		})
	}()
	waitFor(t, 30*time.Second, "slow target to stall", func() bool { return slowFrames.Load() >= 3 })
	for range 12 {
		e.produce(500, []string{"a", "b"}, 1000, rnd) // ~6 MB, 24x the budget
	}
	end := e.lastOffset() + 1
	waitFor(t, 60*time.Second, "the stalled target to recover from Kafka", func() bool {
		st := targetStatus(tp.p, "slow")
		return st.State == "RF" && st.Overflows > 0
	})
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	tp.waitMain(t, end-1)
	if err := admin.DeleteRecords(e.topic, map[int32]int64{0: end}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	e.produce(50, []string{"a", "b"}, 100, rnd)
	last := e.lastOffset()
	close(release)
	var ended error
	waitFor(t, 90*time.Second, "slow to reach the end or its stream to end", func() bool {
		select {
		case ended = <-slowErr:
			return true
		default:
			return slow.Applied() >= last
		}
	})
	if ended != nil || slow.Applied() < last {
		t.Fatalf("the slow target's stream ended (%v) at %d: the resync should have come on the same stream", ended, slow.Applied())
	}
	st := targetStatus(tp.p, "slow")
	t.Logf("slow target after the resync: %+v", st)
	if want := []statecastv1.ResyncRequired_Reason{statecastv1.ResyncRequired_REASON_BELOW_LOG_START}; !slices.Equal(slow.resyncs, want) {
		t.Errorf("slow: resyncs %v, want %v", slow.resyncs, want)
	}
	select {
	case err := <-slowErr:
		t.Fatalf("the slow target's stream ended (%v): the resync should have come on the same stream", err)
	default:
	}
	cancel()
	if err := <-slowErr; err != nil {
		t.Errorf("slow session: %v", err)
	}
	e.check()
}
