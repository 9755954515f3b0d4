package distributor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/statecast/statecast/kafkaconn"
)

// brokerDefaultMaxMessageBytes is Kafka's default message.max.bytes / max.message.bytes.
const brokerDefaultMaxMessageBytes = 1048588

// ensureTopic creates the stream's topic when missing (one partition, compacted, with the
// configured settings) and refuses an existing topic that has more than one partition or is
// not compacted. It returns the topic's max.message.bytes.
func ensureTopic(admin sarama.ClusterAdmin, s *StreamConfig) (int, error) {
	ms := func(d interface{ Milliseconds() int64 }) *string {
		v := strconv.FormatInt(d.Milliseconds(), 10)
		return &v
	}
	compact := "compact"
	entries := map[string]*string{
		"cleanup.policy":        &compact,
		"delete.retention.ms":   ms(s.DeleteRetention),
		"segment.ms":            ms(s.Segment),
		"min.compaction.lag.ms": ms(s.MinCompactionLag),
	}
	for k, v := range s.TopicConfigs {
		entries[k] = &v
	}
	err := admin.CreateTopic(s.Topic, &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: s.ReplicationFactor, ConfigEntries: entries,
	}, false)
	var terr *sarama.TopicError
	if err != nil && !(errors.As(err, &terr) && terr.Err == sarama.ErrTopicAlreadyExists) {
		return 0, fmt.Errorf("distributor: create topic %q: %w", s.Topic, err)
	}
	// A topic just created may not be in the metadata yet: retry for a while.
	var metas []*sarama.TopicMetadata
	for attempt := 0; ; attempt++ {
		metas, err = admin.DescribeTopics([]string{s.Topic})
		if err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) > 0 {
			break
		}
		if err == nil && len(metas) == 1 {
			err = metas[0].Err
		}
		if attempt >= 50 {
			return 0, fmt.Errorf("distributor: describe topic %q: %v", s.Topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(metas[0].Partitions); n != 1 {
		return 0, fmt.Errorf("%w: topic %q has %d partitions; a stream needs exactly 1 (global order)", ErrTopic, s.Topic, n)
	}
	cfg, err := kafkaconn.TopicConfig(admin, s.Topic)
	if err != nil {
		return 0, fmt.Errorf("distributor: describe configs of topic %q: %w", s.Topic, err)
	}
	maxBytes := brokerDefaultMaxMessageBytes
	policy := ""
	for _, e := range cfg {
		switch e.Name {
		case "cleanup.policy":
			policy = e.Value
		case "max.message.bytes":
			if n, err := strconv.Atoi(e.Value); err == nil && n > 0 {
				maxBytes = n
			}
		}
	}
	if !strings.Contains(policy, "compact") {
		return 0, fmt.Errorf("%w: topic %q has cleanup.policy=%q; a stream needs compact", ErrTopic, s.Topic, policy)
	}
	return maxBytes, nil
}
