package testenv_test

import (
	"context"
	"strings"
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

// TestDedicatedKafkaRestartKeepsData: a broker restarted by deploy/local/kafka.sh (a graceful
// restart, and a start after SIGKILL) answers on the same address with its topics and
// records.
func TestDedicatedKafkaRestartKeepsData(t *testing.T) {
	k := testenv.DedicatedKafka(t)
	admin, err := sarama.NewClusterAdmin(k.Brokers, kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic("kept", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	produce := func(v string) {
		t.Helper()
		p, err := sarama.NewSyncProducer(k.Brokers, kafkaconn.ProducerConfig("testenv"))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "kept", Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []string {
		t.Helper()
		c, err := sarama.NewConsumer(k.Brokers, kafkaconn.NewConfig("testenv"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pc, err := c.ConsumePartition("kept", 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		var out []string
		for {
			select {
			case m := <-pc.Messages():
				out = append(out, string(m.Value))
			case <-time.After(3 * time.Second):
				return out
			}
		}
	}
	produce("a")
	k.Restart(t)
	produce("b")
	k.Kill(t)
	k.Start(t)
	if got := strings.Join(read(), ","); got != "a,b" {
		t.Fatalf("after a restart and a kill: records %q, want a,b", got)
	}
}

// TestDedicatedPostgresRestartKeepsData: a cluster restarted by deploy/local/postgres.sh
// answers on the same DSN with its data.
func TestDedicatedPostgresRestartKeepsData(t *testing.T) {
	p := testenv.DedicatedPostgres(t)
	ctx := context.Background()
	exec := func(sql string, out ...any) {
		t.Helper()
		conn, err := pgx.Connect(ctx, p.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if len(out) > 0 {
			err = conn.QueryRow(ctx, sql).Scan(out...)
		} else {
			_, err = conn.Exec(ctx, sql)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	p.Restart(t)
	var v int
	exec("SELECT v FROM kept", &v)
	if v != 7 {
		t.Fatalf("after a restart: %d, want 7", v)
	}
}

// TestKafkaSASL: the broker's SASL_SSL listener takes SCRAM-SHA-512, SCRAM-SHA-256 and
// PLAIN over TLS verified with the test CA, carries the same topics as the plaintext one,
// and refuses a wrong password, a client without TLS and a CA that did not sign it.
func TestKafkaSASL(t *testing.T) {
	conn := testenv.KafkaSASL(t)
	topic := testenv.NewTopic(t, "sasl", nil)
	for _, mech := range []string{kafkaconn.SASLScramSHA512, kafkaconn.SASLScramSHA256, kafkaconn.SASLPlain} {
		c := conn
		c.SASL.Mechanism = mech
		if err := kafkaRoundTrip(t, topic, c, mech); err != nil {
			t.Errorf("%s: %v", mech, err)
		}
	}
	refused(t, topic, conn, map[string]func(*kafkaconn.Config){
		"wrong password": func(c *kafkaconn.Config) { c.SASL.Password += "x" },
		"no TLS":         func(c *kafkaconn.Config) { c.TLS = kafkaconn.TLS{} },
		"another CA":     func(c *kafkaconn.Config) { c.TLS.CAFile = testenv.NewPKI(t).CAFile },
	})
}

// TestKafkaMTLS: the mutual-TLS listener takes the client certificate deploy/local made,
// and refuses a client without one, one with a certificate from another CA, and plaintext.
func TestKafkaMTLS(t *testing.T) {
	conn := testenv.KafkaMTLS(t)
	topic := testenv.NewTopic(t, "mtls", nil)
	if err := kafkaRoundTrip(t, topic, conn, "mtls"); err != nil {
		t.Errorf("the client certificate: %v", err)
	}
	refused(t, topic, conn, map[string]func(*kafkaconn.Config){
		"no client certificate": func(c *kafkaconn.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" },
		"a certificate from another CA": func(c *kafkaconn.Config) {
			other := testenv.NewPKI(t)
			c.TLS.CertFile, c.TLS.KeyFile = other.ClientCert, other.ClientKey
		},
		"no TLS": func(c *kafkaconn.Config) { c.TLS = kafkaconn.TLS{} },
	})
}

// kafkaRoundTrip produces value to topic through c and reads it back on the plaintext listener.
func kafkaRoundTrip(t *testing.T, topic string, c kafkaconn.Config, value string) error {
	c.Timeout = 10 * time.Second
	sc := c.SaramaProducerConfig()
	sc.Metadata.Retry.Max = 1
	p, err := sarama.NewSyncProducer(c.Brokers, sc)
	if err != nil {
		return err
	}
	defer p.Close()
	_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(value)})
	if err != nil {
		return err
	}
	cons, err := sarama.NewConsumer(testenv.KafkaBrokers(t), kafkaconn.NewConfig("testenv"))
	if err != nil {
		return err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, off)
	if err != nil {
		return err
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Value) != value {
			t.Errorf("read back %q, want %q", m.Value, value)
		}
	case <-time.After(20 * time.Second):
		t.Error("nothing read back")
	}
	return nil
}

// refused checks that conn changed by each edit cannot produce to topic.
func refused(t *testing.T, topic string, conn kafkaconn.Config, edits map[string]func(*kafkaconn.Config)) {
	t.Helper()
	for name, edit := range edits {
		c := conn
		edit(&c)
		if err := c.Validate(); err != nil { // reloads the TLS settings
			t.Fatal(err)
		}
		if err := kafkaRoundTrip(t, topic, c, name); err == nil {
			t.Errorf("%s: accepted", name)
		}
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
