package saramapc

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// produceWithHeader writes kvs to partition 0 of topic, each with the header origin=test.
func produceWithHeader(t *testing.T, brokers []string, topic string, kvs ...string) []int64 {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("saramapc-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var offs []int64
	for i := 0; i < len(kvs); i += 2 {
		_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(kvs[i]), Value: sarama.StringEncoder(kvs[i+1]),
			Headers: []sarama.RecordHeader{{Key: []byte("origin"), Value: []byte("test")}}})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	return offs
}

// TestDeadLetterTopic: a record that always fails is produced to the dead-letter topic with
// its key, value, headers and the origin headers, once, in every commit mode (in the
// transactional one inside the transaction that commits its offset); the callback runs
// too, and the other records go on.
func TestDeadLetterTopic(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	for _, mode := range []CommitMode{CommitAsync, CommitSync, CommitTransactional} {
		t.Run(mode.String(), func(t *testing.T) {
			in := testenv.NewTopic(t, "pc_dlq_in", nil)
			out := testenv.NewTopic(t, "pc_dlq_out", nil)
			dlq := testenv.NewTopic(t, "pc_dlq", nil)
			group := testenv.UniqueName("g")
			kvs := keyed(40, 4, "v")
			kvs[2*5+1] = "poison" // offset 5, key k1
			offs := produceWithHeader(t, brokers, in, kvs...)
			poison := errors.New("cannot process")
			var cfg Config
			if mode == CommitTransactional {
				cfg = txnConfig(brokers, group, in, func(_ context.Context, r parallel.Record[Message], o *Producer) error {
					echo(o, out, r.Value) // dropped for the poison: its attempts fail
					if string(r.Value.Value) == "poison" {
						return poison
					}
					return nil
				})
			} else {
				cfg = testConfig(brokers, group, in, func(_ context.Context, r parallel.Record[Message]) error {
					if string(r.Value.Value) == "poison" {
						return poison
					}
					return nil
				})
			}
			cfg.Commit = mode
			cfg.Engine.MaxAttempts = 2
			cfg.Engine.Backoff = parallel.ExponentialBackoff(time.Millisecond, 10*time.Millisecond)
			cfg.Engine.OnFailure = parallel.FailSkip
			cfg.DeadLetterTopic = dlq
			called := make(chan int64, 10)
			cfg.Engine.DeadLetter = func(_ context.Context, r parallel.Record[Message], err error) { called <- r.Offset }
			_, stop := start(t, cfg)
			cl := newClient(t, brokers)
			waitCommitted(t, cl, group, in, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if len(called) != 1 || <-called != offs[5] {
				t.Errorf("the DeadLetter callback was not called once for offset %d", offs[5])
			}
			letters := readCommitted(t, brokers, dlq)
			if len(letters) != 1 {
				t.Fatalf("%d dead letters, want 1: %+v", len(letters), letters)
			}
			l := letters[0]
			want := map[string]string{
				"origin": "test", HeaderTopic: in, HeaderPartition: "0", HeaderOffset: strconv.FormatInt(offs[5], 10),
				HeaderAttempts: "2", HeaderError: "cannot process",
			}
			for k, v := range want {
				if l.headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, l.headers[k], v)
				}
			}
			if l.key != "k1" || l.value != "poison" {
				t.Errorf("dead letter %q=%q, want k1=poison", l.key, l.value)
			}
			if mode == CommitTransactional {
				outs := readCommitted(t, brokers, out)
				if len(outs) != len(offs)-1 {
					t.Errorf("%d outputs, want %d (all but the poison)", len(outs), len(offs)-1)
				}
				for _, o := range outs {
					if o.value == "0/"+strconv.FormatInt(offs[5], 10) {
						t.Error("the poison's output of a failed attempt was committed")
					}
				}
			}
		})
	}
}

// TestDeadLetterTopicUnwritable: a dead letter that cannot be produced ends Run with the
// error, and the record's offset is never committed (the next run tries it again).
func TestDeadLetterTopicUnwritable(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopic(t, "pc_dlqbad_in", nil)
	group := testenv.UniqueName("g")
	kvs := keyed(20, 4, "v")
	kvs[2*5+1] = "poison"
	offs := produce(t, brokers, in, kvs...)
	cfg := testConfig(brokers, group, in, func(_ context.Context, r parallel.Record[Message]) error {
		if string(r.Value.Value) == "poison" {
			return errors.New("cannot process")
		}
		return nil
	})
	cfg.Engine.MaxAttempts = 1
	cfg.Engine.OnFailure = parallel.FailSkip
	cfg.DeadLetterTopic = testenv.UniqueName("pc_dlq_missing") // topics are not created on demand
	cfg.RevokeTimeout = 500 * time.Millisecond
	cfg.Producer = defaultProducerConfig(cfg.Sarama)
	cfg.Producer.Producer.Retry.Max = 1
	cfg.Producer.Metadata.Retry.Max = 1
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run: %v, want the dead letter's error", err)
	}
	t.Logf("Run: %v", err)
	cp, err := FetchCheckpoint(newClient(t, brokers), group, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Contains(offs[5]) {
		t.Fatalf("committed %+v includes the record whose dead letter was not produced (offset %d)", cp, offs[5])
	}
}
