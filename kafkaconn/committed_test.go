package kafkaconn_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// txnProducer is a transactional producer of topic on the real broker.
func txnProducer(t *testing.T, brokers []string) sarama.SyncProducer {
	t.Helper()
	pc := kafkaconn.ProducerConfig("kafkaconn-test")
	pc.Producer.Transaction.ID = testenv.UniqueName("txn")
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sendTxn sends values in one transaction, committed or aborted.
func sendTxn(t *testing.T, p sarama.SyncProducer, topic string, commit bool, values ...string) {
	t.Helper()
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if commit {
		err = p.CommitTxn()
	} else {
		err = p.AbortTxn()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadCommittedEndsAtMarkers: a log written in transactions ends with a commit marker,
// holds an aborted transaction and, at the end, an open one. CommittedOffsets' end is the
// last stable offset; NextCommitted skips markers and aborted records; ReadCommitted returns
// every committed record and does not wait for the marker at the end (a reader that waits
// for the record at end-1 never returns).
func TestReadCommittedEndsAtMarkers(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "committed", nil)
	p := txnProducer(t, brokers)
	sendTxn(t, p, topic, true, "a", "b", "c") // 0-2, commit marker 3
	sendTxn(t, p, topic, false, "x", "y")     // 4-5 aborted, abort marker 6
	sendTxn(t, p, topic, true, "d")           // 7, commit marker 8

	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("kafkaconn-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// CommitTxn returns once the coordinator decided; it writes the markers into the
	// partition just after, and the last stable offset moves past the transaction then.
	var start, end int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		start, end, err = kafkaconn.CommittedOffsets(client, topic, 0)
		if (err == nil && start == 0 && end == 9) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || start != 0 || end != 9 {
		t.Fatalf("CommittedOffsets = %d, %d, %v; want 0, 9", start, end, err)
	}
	for _, c := range []struct{ from, end, want int64 }{
		{0, 9, 0}, {2, 9, 2}, {3, 9, 7}, {4, 9, 7}, {4, 7, 7}, {8, 9, 9}, {9, 9, 9},
	} {
		if got, err := kafkaconn.NextCommitted(client, topic, 0, c.from, c.end); err != nil || got != c.want {
			t.Errorf("NextCommitted(%d, %d) = %d, %v; want %d", c.from, c.end, got, err, c.want)
		}
	}

	// An open transaction at the end: the last stable offset stays before it.
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("open")}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.AbortTxn() }()
	if _, end, err = kafkaconn.CommittedOffsets(client, topic, 0); err != nil || end != 9 {
		t.Fatalf("CommittedOffsets with an open transaction: end %d, %v; want 9", end, err)
	}

	read := func(from int64) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var got []string
		err := kafkaconn.ReadCommitted(ctx, client, topic, 0, from, end, func(m *sarama.ConsumerMessage) error {
			got = append(got, string(m.Value))
			return nil
		})
		if err != nil {
			t.Fatalf("ReadCommitted from %d: %v", from, err)
		}
		return got
	}
	if got := read(0); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("ReadCommitted from 0 = %q", got)
	}
	if got := read(3); !slices.Equal(got, []string{"d"}) {
		t.Errorf("ReadCommitted from 3 = %q", got)
	}
	if got := read(8); len(got) != 0 {
		t.Errorf("ReadCommitted from 8 = %q", got)
	}
}

// TestTopicID: a topic's ID is stable, a topic deleted and created again under the same name
// has another one, and asking for a missing topic neither creates it nor returns an ID.
func TestTopicID(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("kafkaconn-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	topic := testenv.UniqueName("topicid")
	if _, err := kafkaconn.TopicID(client, topic); !errors.Is(err, kafkaconn.ErrTopicMissing) {
		t.Fatalf("TopicID of a missing topic: %v", err)
	}
	create := func() sarama.Uuid {
		t.Helper()
		if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		var id sarama.Uuid
		waitFor(t, "the topic's ID", func() bool {
			id, err = kafkaconn.TopicID(client, topic)
			return err == nil && id != (sarama.Uuid{})
		})
		return id
	}
	first := create()
	t.Cleanup(func() { _ = admin.DeleteTopic(topic) })
	if again, err := kafkaconn.TopicID(client, topic); err != nil || again != first {
		t.Fatalf("TopicID again = %v, %v; want %v", again, err, first)
	}
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the topic gone", func() bool {
		_, err := kafkaconn.TopicID(client, topic)
		return errors.Is(err, kafkaconn.ErrTopicMissing)
	})
	var second sarama.Uuid
	created := false
	waitFor(t, "the topic created again", func() bool {
		if !created {
			// The deletion may still be under way.
			created = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false) == nil
			if !created {
				return false
			}
		}
		second, err = kafkaconn.TopicID(client, topic)
		return err == nil && second != (sarama.Uuid{})
	})
	if second == first {
		t.Fatalf("the recreated topic has the same ID %v", first)
	}
}

// TestNoAutoCreate: a client built from NewConfig asks for a missing topic's metadata
// without creating it, even from a broker that auto-creates topics (a deleted stream topic
// must not come back empty under a new ID because a reader asked for it).
func TestNoAutoCreate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := kafkaconn.NewConfig("kafkaconn-test")
	cfg.Metadata.Retry.Max = 0
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Partitions("never-created"); err == nil {
		t.Error("metadata of a missing topic succeeded")
	}
	if _, err := kafkaconn.TopicID(client, "never-created"); !errors.Is(err, kafkaconn.ErrTopicMissing) {
		t.Errorf("TopicID: %v", err)
	}
	if err := client.RefreshMetadata(); err != nil {
		t.Fatal(err)
	}
	topics, err := client.Topics()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(topics, "never-created") {
		t.Errorf("the metadata request created the topic: %v", topics)
	}
}

// TestReadCommittedIsDefault: every reader built from NewConfig reads read_committed.
func TestReadCommittedIsDefault(t *testing.T) {
	c := kafkaconn.NewConfig("x")
	if c.Consumer.IsolationLevel != sarama.ReadCommitted || c.Metadata.AllowAutoTopicCreation {
		t.Fatalf("isolation %v, auto-create %v", c.Consumer.IsolationLevel, c.Metadata.AllowAutoTopicCreation)
	}
	if p := kafkaconn.ProducerConfig("x"); p.Metadata.AllowAutoTopicCreation {
		t.Fatal("producer config auto-creates topics")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timeout waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
