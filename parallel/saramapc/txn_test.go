package saramapc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

// TestTransactionalExactlyOnce: outputs of attempts that failed are discarded, every input's
// output is committed once, in key order, with the offsets; a restart processes nothing again.
func TestTransactionalExactlyOnce(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopicPartitions(t, "pc_txn_in", 2, nil)
	out := testenv.NewTopicPartitions(t, "pc_txn_out", 3, nil)
	group := testenv.UniqueName("g")
	ins := produceHashed(t, brokers, in, 300, 12)
	var mu sync.Mutex
	failed := map[string]bool{}
	runs := 0
	handler := func(_ context.Context, r parallel.Record[Message], o *Producer) error {
		time.Sleep(time.Duration(r.Offset%3) * time.Millisecond)
		echo(o, out, r.Value)
		mu.Lock()
		defer mu.Unlock()
		runs++
		id := input{partition: r.Value.Partition, offset: r.Offset}.id()
		if r.Offset%7 == 0 && !failed[id] {
			failed[id] = true
			return errors.New("first attempt fails after sending") // its output is dropped
		}
		return nil
	}
	cfg := txnConfig(brokers, group, in, handler)
	cfg.Topics = []string{in}
	cfg.Engine.Backoff = parallel.ExponentialBackoff(time.Millisecond, 5*time.Millisecond)
	c, stop := start(t, cfg)
	cl := newClient(t, brokers)
	waitAllCommitted(t, cl, group, in, ins)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := c.CommitStats()
	if st.Commits == 0 || st.Outputs != int64(len(ins)) {
		t.Errorf("commit stats %+v, want some commits and %d outputs", st, len(ins))
	}
	checkExactlyOnce(t, ins, readCommitted(t, brokers, out))
	mu.Lock()
	if runs != len(ins)+len(failed) {
		t.Errorf("%d handler runs for %d inputs and %d failed attempts", runs, len(ins), len(failed))
	}
	mu.Unlock()

	// A second consumer of the group finds everything committed: no run, no output.
	cfg2 := txnConfig(brokers, group, in, func(_ context.Context, r parallel.Record[Message], o *Producer) error {
		t.Errorf("resumable: input %d/%d processed again", r.Value.Partition, r.Offset)
		echo(o, out, r.Value)
		return nil
	})
	c2, stop2 := start(t, cfg2)
	waitUntil(t, "second consumer claimed", func() bool { return len(c2.Stats()) == 2 })
	time.Sleep(500 * time.Millisecond)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, ins, readCommitted(t, brokers, out))
}

// TestTransactionalBoundedOutputs: with commits far apart, the outputs waiting for their
// transaction stay within MaxPendingBytes: past half of it a commit starts early, at the
// bound handlers wait for room. Everything is still committed exactly once.
func TestTransactionalBoundedOutputs(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopic(t, "pc_txnbound_in", nil)
	out := testenv.NewTopic(t, "pc_txnbound_out", nil)
	group := testenv.UniqueName("g")
	ins := produceHashed(t, brokers, in, 300, 30)
	const size, bound = 100, 2000 // 20 outputs
	cfg := txnConfig(brokers, group, in, func(_ context.Context, r parallel.Record[Message], o *Producer) error {
		v := fmt.Sprintf("%d/%d", r.Value.Partition, r.Offset)
		o.Send(&sarama.ProducerMessage{Topic: out, Key: sarama.ByteEncoder(r.Key),
			Value: sarama.StringEncoder(v + strings.Repeat(" ", size-len(r.Key)-len(v)))})
		return nil
	})
	cfg.CommitInterval = time.Hour
	cfg.MaxPendingBytes = bound
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	most := 0
	c.onCommit = func(_ string, _ int32, _ parallel.Progress, outputs int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			most = max(most, outputs)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-errc
		}
	})
	// The tail below half the bound waits for the (hourly) tick: stop once everything is
	// processed, which commits it.
	end := ins[len(ins)-1].offset + 1
	waitUntil(t, "every record processed", func() bool {
		for _, s := range c.Stats() {
			return s.Watermark == end
		}
		return false
	})
	cancel()
	stopped = true
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	waitAllCommitted(t, newClient(t, brokers), group, in, ins)
	st := c.CommitStats()
	mu.Lock()
	t.Logf("%+v, at most %d outputs in a transaction", st, most)
	if most > bound/size {
		t.Errorf("a transaction carried %d outputs of %d bytes: more than MaxPendingBytes %d", most, size, bound)
	}
	mu.Unlock()
	if st.Commits < int64(len(ins)*size/bound) {
		t.Errorf("%d transactions for %d outputs: the bound did not start commits early", st.Commits, len(ins))
	}
	outs := readCommitted(t, brokers, out)
	for i := range outs {
		outs[i].value = strings.TrimSpace(outs[i].value)
	}
	checkExactlyOnce(t, ins, outs)
}

// TestTransactionalConfig: the mode's requirements are checked by New.
func TestTransactionalConfig(t *testing.T) {
	h := func(context.Context, parallel.Record[Message], *Producer) error { return nil }
	eh := func(context.Context, parallel.Record[Message]) error { return nil }
	base := func() Config {
		return Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Commit: CommitTransactional, TxnHandler: h}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"ok", func(*Config) {}, true},
		{"no TxnHandler", func(c *Config) { c.TxnHandler = nil }, false},
		{"Engine.Handler too", func(c *Config) { c.Engine.Handler = eh }, false},
		{"read uncommitted", func(c *Config) { c.IsolationLevel = ReadUncommitted }, false},
		{"TxnHandler without the mode", func(c *Config) { c.Commit = CommitAsync; c.Engine.Handler = eh }, false},
		{"unknown mode", func(c *Config) { c.Commit = 7 }, false},
		{"dead letters need FailSkip", func(c *Config) { c.DeadLetterTopic = "dlq" }, false},
		{"dead letters", func(c *Config) { c.DeadLetterTopic = "dlq"; c.Engine.OnFailure = parallel.FailSkip }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mod(&cfg)
			c, err := New(cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("New: %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("%v does not wrap ErrConfig", err)
				}
				return
			}
			pc := c.cfg.Producer
			if pc == nil || pc.Producer.Transaction.ID == "" || pc.Producer.Transaction.ID != c.cfg.TransactionalID ||
				!pc.Producer.Idempotent || pc.Net.MaxOpenRequests != 1 || pc.Producer.RequiredAcks != sarama.WaitForAll {
				t.Fatalf("producer config %+v", pc)
			}
			if c.cfg.Sarama.Consumer.IsolationLevel != sarama.ReadCommitted {
				t.Fatal("not read_committed")
			}
			if err := pc.Validate(); err != nil {
				t.Fatalf("sarama refuses the producer config: %v", err)
			}
		})
	}
}
