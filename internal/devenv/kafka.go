package devenv

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is an in-process Kafka-protocol broker (kfake), one node, listening on
// localhost. Topics keep their configs, including cleanup.policy=compact.
type Broker struct {
	c *kfake.Cluster
}

// StartBroker starts the embedded broker on a free port.
func StartBroker() (*Broker, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("statecast-dev"))
	if err != nil {
		return nil, fmt.Errorf("devenv: start embedded kafka: %w", err)
	}
	return &Broker{c: c}, nil
}

// Addrs returns the broker addresses to give Kafka clients.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Close stops the broker; its data is lost.
func (b *Broker) Close() { b.c.Close() }
