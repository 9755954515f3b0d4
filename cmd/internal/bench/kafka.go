package bench

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// clientID names every Kafka client of the benchmarks on the broker.
const clientID = "cachebench"

// UniqueName returns prefix plus a random suffix, usable as a database or topic name.
func UniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// createTopic creates topic with one partition and cleanup.policy=compact, as the
// distributor does.
func createTopic(brokers []string, topic string) error {
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig(clientID))
	if err != nil {
		return err
	}
	defer admin.Close()
	compact := "compact"
	return admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
}

// deleteTopics deletes the topics, ignoring errors (a benchmark's clean-up).
func deleteTopics(brokers []string, topics ...string) {
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig(clientID))
	if err != nil {
		return
	}
	for _, t := range topics {
		_ = admin.DeleteTopic(t)
	}
	_ = admin.Close()
}

// NewTopic creates a uniquely named topic (createTopic) and returns its name and a
// function deleting it.
func NewTopic(brokers []string, prefix string) (string, func(), error) {
	name := UniqueName(prefix)
	if err := createTopic(brokers, name); err != nil {
		return "", nil, err
	}
	return name, func() { deleteTopics(brokers, name) }, nil
}

// EndOffset returns the end offset (high-water mark) of partition 0 of topic.
func EndOffset(brokers []string, topic string) (int64, error) {
	c, err := sarama.NewClient(brokers, kafkaconn.NewConfig(clientID))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.GetOffset(topic, 0, sarama.OffsetNewest)
}
