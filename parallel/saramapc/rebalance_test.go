package saramapc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

// TestRebalanceTwoConsumers: consumer B joins while A is working (a rebalance), then A leaves
// (another). Every record is processed exactly once across both, in key order: on revoke the
// owner finishes its in-flight records and commits before the partition moves.
func TestRebalanceTwoConsumers(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_rebalance", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(400, 10, "v")...)
	rec := newRecorder() // shared: checks key order across the hand-over
	var byA, byB atomic.Int64
	handler := func(n *atomic.Int64) parallel.Handler[Message] {
		return func(_ context.Context, r parallel.Record[Message]) error {
			time.Sleep(time.Duration(r.Offset%4) * time.Millisecond)
			rec.add(r.Value)
			n.Add(1)
			return nil
		}
	}
	_, stopA := start(t, testConfig(brokers, group, topic, handler(&byA)))
	waitUntil(t, "A working", func() bool { return byA.Load() >= 50 })
	_, stopB := start(t, testConfig(brokers, group, topic, handler(&byB)))
	waitUntil(t, "progress after B joined", func() bool { return byA.Load()+byB.Load() >= 200 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, brokers)
	waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	if byB.Load() == 0 {
		t.Fatal("B never processed anything")
	}
	got := rec.processed()
	for _, o := range offs {
		if got[o] != 1 {
			t.Errorf("unique/reliable: offset %d processed %d times", o, got[o])
		}
	}
	rec.checkKeyOrder(t)
	t.Logf("A processed %d, B processed %d", byA.Load(), byB.Load())
}
