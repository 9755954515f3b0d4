package chaos

import (
	"testing"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/player"
)

// TestConfs: the config files a run writes for its players and distributors load, so that a
// renamed or removed key fails here rather than in the middle of a run.
func TestConfs(t *testing.T) {
	p, err := player.ParseConfig([]byte(playerConf("127.0.0.1:1", "127.0.0.1:2", []string{"127.0.0.1:3"}, "player-1")))
	if err != nil {
		t.Fatalf("playerConf: %v", err)
	}
	if len(p.Kafka.Brokers) != 1 || p.Kafka.Brokers[0] != "127.0.0.1:3" || p.Kafka.ClientID != "player-1" || p.Admin.Addr != "" {
		t.Errorf("playerConf: %+v", p)
	}
	d, err := distributor.ParseConfig([]byte(distributorConf("postgres://u@127.0.0.1/db", []string{"127.0.0.1:3"}, "dist-1", "127.0.0.1:4", 1)))
	if err != nil {
		t.Fatalf("distributorConf: %v", err)
	}
	if len(d.Kafka.Brokers) != 1 || d.Kafka.ClientID != "dist-1" || len(d.Streams) != 1 || d.Streams[0].ReplicationFactor != 1 ||
		d.Streams[0].TopicConfigs["min.insync.replicas"] != "" {
		t.Errorf("distributorConf: %+v", d)
	}
	// On a cluster: every broker to bootstrap from, replication factor 3, min.insync.replicas=2.
	brokers := []string{"127.0.0.1:3", "127.0.0.1:5", "127.0.0.1:6"}
	d, err = distributor.ParseConfig([]byte(distributorConf("postgres://u@127.0.0.1/db", brokers, "dist-1", "127.0.0.1:4", 3)))
	if err != nil {
		t.Fatalf("distributorConf on 3 nodes: %v", err)
	}
	if len(d.Kafka.Brokers) != 3 || d.Streams[0].ReplicationFactor != 3 || d.Streams[0].TopicConfigs["min.insync.replicas"] != "2" {
		t.Errorf("distributorConf on 3 nodes: brokers %v, replication factor %d, topic configs %v",
			d.Kafka.Brokers, d.Streams[0].ReplicationFactor, d.Streams[0].TopicConfigs)
	}
}
