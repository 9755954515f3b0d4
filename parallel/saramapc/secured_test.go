package saramapc

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// TestKafkaSecured: a consumer whose Config.Kafka is one of the real broker's secured
// listeners — SASL_SSL (TLS with the test CA, SCRAM) or mutual TLS (a client certificate) —
// joins its group, processes every record and commits its checkpoint through it.
func TestKafkaSecured(t *testing.T) {
	for _, l := range testenv.KafkaSecured(t) {
		t.Run(l.Name, func(t *testing.T) { testKafkaSecured(t, l.Conn, l.Name == "mtls") })
	}
}

func testKafkaSecured(t *testing.T, conn kafkaconn.Config, mtls bool) {
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
	cfg.Kafka.ClientID = "saramapc-secured-test"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The same group settings as the other tests'.
	cfg.Sarama.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Sarama.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Sarama.Consumer.Group.Heartbeat.Interval = time.Second
	if !cfg.Sarama.Net.TLS.Enable || cfg.Sarama.Net.SASL.Enable == mtls {
		t.Fatalf("Config.Kafka's TLS and SASL did not reach sarama: %+v %+v", cfg.Sarama.Net.TLS, cfg.Sarama.Net.SASL.Mechanism)
	}
	if mtls && len(cfg.Sarama.Net.TLS.Config.Certificates) != 1 {
		t.Fatalf("Config.Kafka's client certificate did not reach sarama")
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
