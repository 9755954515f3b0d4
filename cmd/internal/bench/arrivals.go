package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// Arrivals is a consumer of partition 0 of a topic that records when it first saw each
// key.
type Arrivals struct {
	mu   sync.Mutex
	seen map[string]time.Time
	stop func()
}

// ConsumeFrom starts an Arrivals consumer of topic at offset from.
func ConsumeFrom(ctx context.Context, brokers []string, topic string, from int64) (*Arrivals, error) {
	cfg := kafkaconn.NewConfig(clientID + "-lat")
	cfg.Consumer.MaxWaitTime = FetcherWait
	c, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		return nil, err
	}
	pc, err := c.ConsumePartition(topic, 0, from)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	a := &Arrivals{seen: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-pc.Messages():
				now := time.Now()
				a.mu.Lock()
				if _, ok := a.seen[string(m.Key)]; !ok {
					a.seen[string(m.Key)] = now
				}
				a.mu.Unlock()
			case <-pc.Errors():
			}
		}
	})
	a.stop = func() {
		cancel()
		wg.Wait()
		_ = pc.Close()
		_ = c.Close()
	}
	return a, nil
}

// Get returns when key was first seen.
func (a *Arrivals) Get(key string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.seen[key]
	return t, ok
}

// Collect waits until every key arrived (or timeout) and returns, per key, its arrival
// minus sent[i].
func (a *Arrivals) Collect(ctx context.Context, keys []string, sent []time.Time, timeout time.Duration) ([]time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var out []time.Duration
	for i := 0; i < len(keys); {
		if t, ok := a.Get(keys[i]); ok {
			out = append(out, t.Sub(sent[i]))
			i++
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("record %s not seen within %v", keys[i], timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return out, nil
}

// Close stops the consumer.
func (a *Arrivals) Close() { a.stop() }
