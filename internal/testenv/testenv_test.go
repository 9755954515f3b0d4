package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestKafkaRoundTrip checks that sarama, with statecast's settings, produces to and
// consumes from the broker that deploy/local started.
func TestKafkaRoundTrip(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "env", map[string]string{"cleanup.policy": "compact"})
	p, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("testenv"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sarama.NewConsumer(brokers, kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, off)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Key) != "k" || string(m.Value) != "v" || m.Offset != off {
			t.Fatalf("got %q=%q at %d, want k=v at %d", m.Key, m.Value, m.Offset, off)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no message consumed")
	}
}

// TestPostgresDatabase checks that a fresh database can be created and used.
func TestPostgresDatabase(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("wal_level = %q, want logical", level)
	}
}

// TestNewTopicPartitions checks that the topic has the partitions asked for.
func TestNewTopicPartitions(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopicPartitions(t, "env_parts", 3, nil)
	cl, err := sarama.NewClient(brokers, kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	parts, err := cl.Partitions(topic)
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions of %s: %v, %v; want 3", topic, parts, err)
	}
}
