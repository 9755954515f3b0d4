package saramapc

import (
	"context"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// TestAbortedTransactionSkippedByDefault: the records of an aborted transaction are not
// processed by default (read_committed); with IsolationLevel ReadUncommitted they are.
func TestAbortedTransactionSkippedByDefault(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_aborted", nil)
	pc := kafkaconn.ProducerConfig("saramapc-txn")
	pc.Producer.Transaction.ID = testenv.UniqueName("txn")
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatal(err)
	}
	aborted := map[int64]bool{}
	var last int64
	for txn, commit := range []bool{true, false, true, false, true} {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint("k", i)), Value: sarama.StringEncoder(fmt.Sprint(txn))})
			if err != nil {
				t.Fatal(err)
			}
			aborted[off] = !commit
			last = off
		}
		if commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = p.Close()
	cl := newClient(t, brokers)
	for _, level := range []IsolationLevel{ReadCommitted, ReadUncommitted} {
		t.Run(level.String(), func(t *testing.T) {
			group := testenv.UniqueName("g")
			rec := newRecorder()
			cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
				rec.add(r.Value)
				return nil
			})
			if level == ReadUncommitted {
				cfg.IsolationLevel = ReadUncommitted
			}
			_, stop := start(t, cfg)
			// The last commit marker follows the last record.
			waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark >= last+1 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := rec.processed()
			for off, ab := range aborted {
				want := 1
				if ab && level == ReadCommitted {
					want = 0
				}
				if got[off] != want {
					t.Errorf("offset %d (aborted %v) processed %d times, want %d", off, ab, got[off], want)
				}
			}
			want := 12 // three committed transactions of four
			if level == ReadUncommitted {
				want = 20
			}
			if len(got) != want {
				t.Errorf("processed %d records, want %d", len(got), want)
			}
			rec.checkKeyOrder(t)
		})
	}
}
