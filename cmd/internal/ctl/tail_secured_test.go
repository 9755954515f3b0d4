package ctl

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestTailSecured: cachectl tail's reader takes a kafkaconn.Config and reads a stream
// through each of the real broker's secured listeners; a wrong password (SASL_SSL) or no
// client certificate (mutual TLS) is refused.
func TestTailSecured(t *testing.T) {
	for _, l := range testenv.KafkaSecured(t) {
		t.Run(l.Name, func(t *testing.T) { testTailSecured(t, l.Conn, l.Name == "mtls") })
	}
}

func testTailSecured(t *testing.T, conn kafkaconn.Config, mtls bool) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "tail_sasl", nil)
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("tail-test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two", "three"} {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	if err := Tail(ctx, TailOptions{Kafka: conn, Topic: topic, From: sarama.OffsetOldest}, func(r Record) error {
		keys = append(keys, string(r.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0] != "one" || keys[2] != "three" {
		t.Fatalf("tail read %v", keys)
	}
	bad := conn
	if mtls {
		bad.TLS.CertFile, bad.TLS.KeyFile = "", ""
	} else {
		bad.SASL.Password += "x"
	}
	bad.Timeout = 5 * time.Second
	if err := bad.Validate(); err != nil { // reloads the TLS settings
		t.Fatal(err)
	}
	if err := Tail(ctx, TailOptions{Kafka: bad, Topic: topic, From: sarama.OffsetOldest}, func(Record) error { return nil }); err == nil {
		t.Fatal("a client without its credential read the stream")
	}
}
