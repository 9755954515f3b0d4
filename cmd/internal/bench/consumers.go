package bench

import (
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// FetcherWait is the longest a fetch waits at the broker for data, as in the player's
// fetchers, so that the consumer baselines poll the broker the way the player does.
const FetcherWait = 100 * time.Millisecond

// Consumers are plain sarama consumers of partition 0, each with its own client; each
// records (offset, payload stamp, arrival) per message into its receiver.
type Consumers struct {
	Recv []*Receiver

	clients []sarama.Client
	pcs     []sarama.PartitionConsumer
	wg      sync.WaitGroup
}

// StartConsumers starts n consumers of topic from offset start.
func StartConsumers(brokers []string, topic string, n int, start int64) (*Consumers, error) {
	c := &Consumers{}
	for i := range n {
		cfg := kafkaconn.NewConfig(clientID + "-consumer-" + strconv.Itoa(i))
		cfg.Consumer.MaxWaitTime = FetcherWait
		cl, err := sarama.NewClient(brokers, cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
		co, err := sarama.NewConsumerFromClient(cl)
		if err != nil {
			c.Close()
			return nil, err
		}
		pc, err := co.ConsumePartition(topic, 0, start)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.pcs = append(c.pcs, pc)
		r := &Receiver{ID: "c" + strconv.Itoa(i)}
		c.Recv = append(c.Recv, r)
		c.wg.Go(func() {
			for m := range pc.Messages() {
				now := time.Now().UnixNano()
				r.record(Delivery{Index: m.Offset, Stamp: stampNanos(m.Value), Applied: now})
			}
		})
	}
	return c, nil
}

// Close stops the consumers and waits for them.
func (c *Consumers) Close() {
	for _, pc := range c.pcs {
		pc.AsyncClose()
	}
	c.wg.Wait()
	for _, cl := range c.clients {
		_ = cl.Close()
	}
}
