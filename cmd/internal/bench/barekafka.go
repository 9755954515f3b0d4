package bench

import (
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// FeedFromKafka makes the bare fan-out a baseline fed from Kafka: one sarama consumer of
// partition 0 of topic from offset 0, configured like the player's main fetcher, encodes
// each record as it arrives as a one-entry batch and hands it to every stream (no queues,
// batching, terms or acks logic). A process running it holds what a process running the
// player holds (fetcher, fan-out, receivers), and the entries arrive in the same bursts.
//
// stop ends the consumer and returns, per offset, when the record was dispatched (unix ns).
func (b *Bare) FeedFromKafka(brokers []string, topic string) (stop func() map[int64]int64, err error) {
	cfg := kafkaconn.NewConfig(clientID + "-bare-fetcher")
	cfg.Consumer.MaxWaitTime = FetcherWait
	cfg.Consumer.Fetch.Default = 4 << 20
	cl, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	co, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	pc, err := co.ConsumePartition(topic, 0, 0)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	dispatched := map[int64]int64{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for m := range pc.Messages() {
			msg := EncodeBatch(&statecastv1.Entry{Index: m.Offset, Key: m.Key, Value: m.Value, View: "v", Kind: statecastv1.Kind_KIND_ROW})
			dispatched[m.Offset] = time.Now().UnixNano()
			b.Publish(msg)
		}
	})
	return func() map[int64]int64 {
		pc.AsyncClose()
		wg.Wait()
		_ = cl.Close()
		return dispatched
	}, nil
}
