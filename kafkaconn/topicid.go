package kafkaconn

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// ErrTopicMissing: the topic does not exist (deleted, or never created).
var ErrTopicMissing = errors.New("kafkaconn: topic does not exist")

// TopicID returns the Kafka topic ID of topic (metadata v10+, KIP-516): a topic deleted and
// created again under the same name has a new one, so an offset is only meaningful together
// with the ID of the topic it was read from. It fails with ErrTopicMissing (wrapped) when
// the topic does not exist; the request never creates it. A broker too old to have topic IDs
// answers the zero ID.
func TopicID(client sarama.Client, topic string) (sarama.Uuid, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		b, err := client.Controller()
		if err != nil {
			last = err
			_, _ = client.RefreshController()
			continue
		}
		req := sarama.NewMetadataRequest(client.Config().Version, []string{topic})
		req.AllowAutoTopicCreation = false
		resp, err := b.GetMetadata(req)
		if err != nil {
			last = err
			_, _ = client.RefreshController()
			continue
		}
		for _, t := range resp.Topics {
			if t.Name != topic {
				continue
			}
			switch {
			case errors.Is(t.Err, sarama.ErrUnknownTopicOrPartition):
				return sarama.Uuid{}, fmt.Errorf("%w: %s", ErrTopicMissing, topic)
			case !errors.Is(t.Err, sarama.ErrNoError):
				return sarama.Uuid{}, fmt.Errorf("kafkaconn: metadata of topic %s: %w", topic, t.Err)
			}
			return t.Uuid, nil
		}
		last = sarama.ErrIncompleteResponse
	}
	return sarama.Uuid{}, fmt.Errorf("kafkaconn: metadata of topic %s: %w", topic, last)
}
