package distributor

import (
	"context"
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
// not compacted. It returns the topic's max.message.bytes and its topic ID (zero when the
// broker has none).
func ensureTopic(admin sarama.ClusterAdmin, s *StreamConfig) (int, sarama.Uuid, error) {
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
		return 0, sarama.Uuid{}, fmt.Errorf("distributor: create topic %q: %w", s.Topic, err)
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
			return 0, sarama.Uuid{}, fmt.Errorf("distributor: describe topic %q: %v", s.Topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(metas[0].Partitions); n != 1 {
		return 0, sarama.Uuid{}, fmt.Errorf("%w: topic %q has %d partitions; a stream needs exactly 1 (global order)", ErrTopic, s.Topic, n)
	}
	cfg, err := kafkaconn.TopicConfig(admin, s.Topic)
	if err != nil {
		return 0, sarama.Uuid{}, fmt.Errorf("distributor: describe configs of topic %q: %w", s.Topic, err)
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
		return 0, sarama.Uuid{}, fmt.Errorf("%w: topic %q has cleanup.policy=%q; a stream needs compact", ErrTopic, s.Topic, policy)
	}
	return maxBytes, metas[0].Uuid, nil
}

// ensureTopic is the package's ensureTopic for s: it sets the stream's record size limit
// and the topic ID it publishes into.
func (s *stream) ensureTopic(admin sarama.ClusterAdmin) error {
	maxBytes, id, err := ensureTopic(admin, s.cfg.StreamConfig)
	if err != nil {
		return err
	}
	if m := s.d.cfg.Kafka.MaxMessageBytes; m > 0 && m < maxBytes {
		maxBytes = m
	}
	if s.topicID != (sarama.Uuid{}) && id != s.topicID {
		s.log.Warn("topic deleted and created again: its state is read back from the new topic and every view republished",
			"stream", s.cfg.Topic, "old_topic_id", s.topicID.String(), "topic_id", id.String())
	}
	s.cfg.maxBytes, s.topicID = maxBytes, id
	return nil
}

// topicCheck is how often an active stream checks that its topic is still the one it
// restored its state from (the same topic ID). A topic deleted and created again — or
// deleted, and created again by this process — holds none of what the in-memory state
// describes: publishing on from that state would leave the new topic without every row that
// did not change.
const topicCheck = 2 * time.Second

// errTopicReplaced: an active stream's topic was deleted, or has another topic ID.
var errTopicReplaced = errors.New("distributor: the stream's topic was deleted or created again")

// watchTopics returns errTopicReplaced (wrapped) when the topic of one of the group's
// streams is missing or has another topic ID than at the activation's start, and nil when
// ctx ends. The activation then ends, and the next one (ensureTopic, restore, a start-up
// epoch from the new topic's state) republishes every view in full.
func (g *group) watchTopics(ctx context.Context) error {
	client, err := sarama.NewClient(g.d.cfg.Kafka.Brokers, g.d.cfg.Kafka.clientConfig("-topic-check"))
	if err != nil {
		return nil // the other clients of the activation report an unreachable broker
	}
	defer client.Close()
	t := time.NewTicker(topicCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, s := range g.streams {
			if s.topicID == (sarama.Uuid{}) {
				continue // no topic IDs: nothing to compare
			}
			id, err := kafkaconn.TopicID(client, s.cfg.Topic)
			switch {
			case errors.Is(err, kafkaconn.ErrTopicMissing):
				return fmt.Errorf("%w: topic %q is missing", errTopicReplaced, s.cfg.Topic)
			case err != nil:
				g.d.log.Debug("topic check failed", "stream", s.cfg.Topic, "err", err)
			case id != s.topicID:
				return fmt.Errorf("%w: topic %q has the topic ID %s, not %s", errTopicReplaced, s.cfg.Topic, id, s.topicID)
			}
		}
	}
}
