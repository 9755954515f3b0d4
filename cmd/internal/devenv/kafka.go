package devenv

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultCompactEvery is how often the embedded broker compacts compacted topics.
const DefaultCompactEvery = 10 * time.Second

// Broker is an in-process Kafka-protocol broker (kfake), one node, listening on
// localhost. Topics keep their configs; topics with cleanup.policy=compact are compacted
// every CompactEvery (kfake's log.cleaner.backoff.ms), everything but the last batch, and
// tombstones are dropped after the topic's delete.retention.ms.
type Broker struct {
	c *kfake.Cluster
}

// StartBroker starts the embedded broker on a free port; compactEvery ≤ 0 means
// DefaultCompactEvery.
func StartBroker(compactEvery time.Duration) (*Broker, error) {
	if compactEvery <= 0 {
		compactEvery = DefaultCompactEvery
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("statecast-dev"),
		kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": strconv.FormatInt(compactEvery.Milliseconds(), 10)}))
	if err != nil {
		return nil, fmt.Errorf("devenv: start embedded kafka: %w", err)
	}
	return &Broker{c: c}, nil
}

// Addrs returns the broker addresses to give Kafka clients.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Close stops the broker; its data is lost.
func (b *Broker) Close() { b.c.Close() }
