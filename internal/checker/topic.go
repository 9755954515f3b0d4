package checker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// ReadTopic reads partition 0 of topic from its log start to its high-water mark (taken
// when the call starts) and returns every record as ground truth for Check: index = offset,
// key, view and kind from the sc-view / sc-kind headers, tombstone = nil value, epoch from
// sc-epoch. Call it after the producers have stopped.
func ReadTopic(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	cfg := kafkaconn.NewConfig("statecast-checker")
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("checker: kafka client: %w", err)
	}
	defer client.Close()
	start, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("checker: log start of %s: %w", topic, err)
	}
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		return nil, fmt.Errorf("checker: end offset of %s: %w", topic, err)
	}
	out := []Record{}
	if end <= start {
		return out, nil
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("checker: consumer: %w", err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, start)
	if err != nil {
		return nil, fmt.Errorf("checker: consume %s from %d: %w", topic, start, err)
	}
	defer pc.Close()
	// The last offsets may be transaction markers that are never returned: stop when the
	// next expected offset reaches end, or after a quiet period past the last record.
	quiet := time.NewTimer(10 * time.Second)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-pc.Errors():
			return nil, fmt.Errorf("checker: read %s: %w", topic, err)
		case m := <-pc.Messages():
			out = append(out, recordOf(m))
			if m.Offset+1 >= end {
				return out, nil
			}
			quiet.Reset(2 * time.Second)
		case <-quiet.C:
			return out, nil
		}
	}
}

func recordOf(m *sarama.ConsumerMessage) Record {
	r := Record{Index: m.Offset, Key: string(m.Key), Tombstone: m.Value == nil, Value: m.Value}
	for _, h := range m.Headers {
		switch string(h.Key) {
		case "sc-view":
			r.View = string(h.Value)
		case "sc-kind":
			r.Kind = string(h.Value)
		case "sc-epoch":
			r.Epoch, _ = strconv.ParseInt(string(h.Value), 10, 64)
		}
	}
	return r
}
