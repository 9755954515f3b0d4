package saramapc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

// TestTransactionalRebalance: B joins while A works on four partitions (a rebalance moves
// some to B), then A leaves (another moves them all to B), then A comes back. Read with
// read_committed, every input has exactly one output, in key order: on revoke a claim
// commits its last transaction before the partition moves, and the new owner starts from it.
func TestTransactionalRebalance(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopicPartitions(t, "pc_txnreb_in", 4, nil)
	out := testenv.NewTopicPartitions(t, "pc_txnreb_out", 3, nil)
	group := testenv.UniqueName("g")
	ins := produceHashed(t, brokers, in, 3000, 50)
	var byA, byB atomic.Int64
	consumer := func(n *atomic.Int64, id string) Config {
		cfg := txnConfig(brokers, group, in, func(ctx context.Context, r parallel.Record[Message], o *Producer) error {
			time.Sleep(time.Duration(2+r.Offset%8) * time.Millisecond)
			echo(o, out, r.Value)
			n.Add(1)
			return nil
		})
		cfg.TransactionalID = group + "-" + id
		cfg.Engine.MaxConcurrency = 2
		return cfg
	}
	_, stopA := start(t, consumer(&byA, "a"))
	waitUntil(t, "A working", func() bool { return byA.Load() >= 200 })
	b, stopB := start(t, consumer(&byB, "b"))
	waitUntil(t, "B working", func() bool { return byB.Load() >= 100 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "B owns everything", func() bool { return len(b.Stats()) == 4 })
	aAgain := atomic.Int64{}
	_, stopA2 := start(t, consumer(&aAgain, "a"))
	cl := newClient(t, brokers)
	waitAllCommitted(t, cl, group, in, ins)
	if err := stopA2(); err != nil {
		t.Fatal(err)
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	t.Logf("A processed %d, B %d, A again %d; B's commits %+v", byA.Load(), byB.Load(), aAgain.Load(), b.CommitStats())
	checkExactlyOnce(t, ins, readCommitted(t, brokers, out))
}
