package saramapc

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

const txnChildEnv = "SARAMAPC_TXN_CHILD"

// txnCrashConfig is the consumer of TestTransactionalKill9: a stable transactional id and a
// static group member, as one restarted instance would have, and short commit intervals so
// that kills land inside transactions too.
func txnCrashConfig(brokers []string, group, in, out string) Config {
	cfg := txnConfig(brokers, group, in, func(ctx context.Context, r parallel.Record[Message], o *Producer) error {
		select {
		case <-time.After(time.Duration(5+rand.IntN(10)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		echo(o, out, r.Value)
		return nil
	})
	cfg.TransactionalID = group + "-instance-0"
	cfg.Sarama.Consumer.Group.InstanceId = "instance-0"
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.Engine.MaxConcurrency = 4
	return cfg
}

// TestTxnCrashChild is the consumer process that TestTransactionalKill9 kills; it does
// nothing in a normal run.
func TestTxnCrashChild(t *testing.T) {
	if os.Getenv(txnChildEnv) == "" {
		t.Skip("helper process")
	}
	brokers := testenv.KafkaBrokers(t)
	cfg := txnCrashConfig(brokers, os.Getenv("SARAMAPC_GROUP"), os.Getenv("SARAMAPC_IN"), os.Getenv("SARAMAPC_OUT"))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Run(context.Background()) // runs until killed
}

// TestTransactionalKill9: the consumer process is killed with SIGKILL at random points —
// while handlers run, while a transaction sends its outputs or commits — and restarted; a
// last consumer finishes. Read with read_committed, every input has exactly one output, in
// key order: what a killed instance had not committed is aborted (its successor's producer,
// same transactional id, aborts the open transaction) and processed again.
func TestTransactionalKill9(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopicPartitions(t, "pc_txnkill_in", 2, nil)
	out := testenv.NewTopicPartitions(t, "pc_txnkill_out", 2, nil)
	group := testenv.UniqueName("g")
	ins := produceHashed(t, brokers, in, 3000, 40)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 14))
	cl := newClient(t, brokers)
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTxnCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), txnChildEnv+"=1", "SARAMAPC_GROUP="+group, "SARAMAPC_IN="+in, "SARAMAPC_OUT="+out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wait := time.Duration(800+rng.IntN(1500)) * time.Millisecond
		time.Sleep(wait)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		var committed []int64
		for p := range int32(2) {
			cp, _ := FetchCheckpoint(cl, group, in, p)
			committed = append(committed, cp.Watermark)
		}
		t.Logf("round %d: killed after %v, committed watermarks %v", round, wait, committed)
	}
	c, stop := start(t, txnCrashConfig(brokers, group, in, out))
	waitAllCommitted(t, cl, group, in, ins)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("last consumer: %+v", c.CommitStats())
	checkExactlyOnce(t, ins, readCommitted(t, brokers, out))
}
