package saramapc

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

// TestKafkaSASLSSL: a consumer whose Config.Kafka is the real broker's SASL_SSL listener
// (TLS with the test CA, SCRAM) joins its group, processes every record and commits its
// checkpoint through it.
func TestKafkaSASLSSL(t *testing.T) {
	conn := testenv.KafkaSASL(t)
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_sasl", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(30, 3, "v")...)
	rec := newRecorder()
	cfg := testConfig(nil, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec.add(r.Value)
		return nil
	})
	cfg.Sarama, cfg.Kafka = nil, conn
	cfg.Kafka.ClientID = "saramapc-sasl-test"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The same group settings as the other tests'.
	cfg.Sarama.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Sarama.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Sarama.Consumer.Group.Heartbeat.Interval = time.Second
	if !cfg.Sarama.Net.TLS.Enable || !cfg.Sarama.Net.SASL.Enable {
		t.Fatalf("Config.Kafka's TLS and SASL did not reach sarama: %+v %+v", cfg.Sarama.Net.TLS, cfg.Sarama.Net.SASL.Mechanism)
	}
	_, stop := start(t, cfg)
	last := offs[len(offs)-1]
	waitCommitted(t, newClient(t, brokers), group, topic, "watermark at end", func(cp parallel.Checkpoint) bool { return cp.Watermark == last+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if n := rec.processed()[o]; n != 1 {
			t.Errorf("offset %d processed %d times", o, n)
		}
	}
}
