package kafkaconn

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/backoff"
)

// Version is the Kafka protocol version statecast speaks. Kafka 4 removed the protocol
// versions older than 2.1, and sarama's default (2.8) lacks newer fetch features, so the
// version is pinned to the broker that deploy/local starts. It also works against kfake.
var Version = sarama.V3_9_0_0

// NewConfig returns a sarama config with statecast's common settings: the pinned
// protocol version, a client id, errors/successes returned on channels, and:
//
//   - consumers read read_committed: streams are written by transactional producers, and
//     the records of a fenced or failed distributor's aborted transactions must never be
//     seen (committed.go says what this does to offsets);
//   - metadata requests never create a topic: a stream's topic is created by its
//     distributor with the settings a stream needs (one partition, compacted), and a
//     client that asked for a deleted topic's metadata on a broker with
//     auto.create.topics.enable would otherwise recreate it empty under a new topic ID.
//
// It has no TLS, SASL or timeout: Config.SaramaConfig adds a connection's.
func NewConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = Version
	c.ClientID = clientID
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.BackoffFunc = func(retries, _ int) time.Duration { return metadataRetry.Delay(retries) }
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Consumer.Return.Errors = true
	return c
}

// metadataRetry and produceRetry are the waits of sarama's own retries of a metadata and a
// produce request: at most 200ms and 100ms, jittered so that the clients of a restarted
// broker do not all retry at once.
var (
	metadataRetry = backoff.Policy{Min: 100 * time.Millisecond, Max: 200 * time.Millisecond}
	produceRetry  = backoff.Policy{Min: 50 * time.Millisecond, Max: 100 * time.Millisecond}
)

// ProducerConfig is NewConfig with the idempotent, ordered producer settings every
// statecast stream is written with: acks=all, one request in flight, retries, lz4
// compression, manual partitioning (a stream has one partition).
func ProducerConfig(clientID string) *sarama.Config {
	c := NewConfig(clientID)
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 10
	c.Producer.Retry.BackoffFunc = func(retries, _ int) time.Duration { return produceRetry.Delay(retries) }
	c.Producer.Compression = sarama.CompressionLZ4
	c.Producer.Partitioner = sarama.NewManualPartitioner
	return c
}

// TopicConfig returns the configuration entries of topic (only names, when given), as the
// broker describes them.
func TopicConfig(admin sarama.ClusterAdmin, topic string, names ...string) ([]sarama.ConfigEntry, error) {
	res, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: names}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("kafkaconn: describe configs of topic %q: %d results", topic, len(res))
	}
	if res[0].ErrorCode != sarama.ErrNoError {
		return nil, fmt.Errorf("kafkaconn: describe configs of topic %q: %w: %s", topic, res[0].ErrorCode, res[0].ErrorMsg)
	}
	return res[0].Configs, nil
}
