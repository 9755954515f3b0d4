package saramapc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// produceTxns writes txns transactions of perTxn records (keys k0..k{perTxn-1}); each commit
// marker takes an offset, leaving a gap. It returns the record offsets and keys.
func produceTxns(t *testing.T, brokers []string, topic string, txns, perTxn int) ([]int64, []string) {
	t.Helper()
	pc := kafkaconn.ProducerConfig("saramapc-txn")
	pc.Producer.Transaction.ID = testenv.UniqueName("txn")
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var offs []int64
	var keys []string
	for range txns {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := range perTxn {
			k := fmt.Sprintf("k%d", i)
			_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder("v")})
			if err != nil {
				t.Fatal(err)
			}
			offs = append(offs, off)
			keys = append(keys, k)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatal(err)
		}
	}
	return offs, keys
}

// TestGapsRestartNoReprocessing: the completed set committed as metadata spans the holes left
// by transaction markers; after a restart only the stuck key's records run again.
func TestGapsRestartNoReprocessing(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_gaprestart", nil)
	group := testenv.UniqueName("g")
	offs, keys := produceTxns(t, brokers, topic, 8, 5)
	stuckOff := offs[2] // first record of k2
	cfg := testConfig(brokers, group, topic, func(ctx context.Context, r parallel.Record[Message]) error {
		if r.Offset == stuckOff {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	cfg.Sarama.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.RevokeTimeout = 200 * time.Millisecond
	_, stop := start(t, cfg)
	cl := newClient(t, brokers)
	cp := waitCommitted(t, cl, group, topic, "completed set over the gaps", func(cp parallel.Checkpoint) bool {
		if cp.Watermark != stuckOff {
			return false
		}
		for i, o := range offs {
			if keys[i] != "k2" && !cp.Contains(o) {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("committed watermark %d, completed %v", cp.Watermark, cp.Completed)

	rec := newRecorder()
	cfg2 := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec.add(r.Value)
		return nil
	})
	_, stop2 := start(t, cfg2)
	last := offs[len(offs)-1]
	waitCommitted(t, cl, group, topic, "watermark past the last record", func(cp parallel.Checkpoint) bool {
		return cp.Watermark == last+1 && len(cp.Completed) == 0
	})
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	got := rec.processed()
	for i, o := range offs {
		want := 0
		if keys[i] == "k2" {
			want = 1
		}
		if got[o] != want {
			t.Errorf("resumable: offset %d (%s) processed %d times after restart, want %d", o, keys[i], got[o], want)
		}
	}
	rec.checkKeyOrder(t)
}
