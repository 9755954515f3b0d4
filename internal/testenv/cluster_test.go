package testenv_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestKafkaClusterNodeLoss: deploy/local/kafka-cluster.sh starts three nodes whose topics
// default to min.insync.replicas=2; with one node's data directory lost, acks=all writes
// go on on the two others, and the node, started empty, fetches the partition again and
// rejoins the ISR with the records, which it serves as the leader again.
func TestKafkaClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three JVMs")
	}
	k := testenv.DedicatedKafkaCluster(t, 3)
	cfg := kafkaconn.NewConfig("testenv")
	admin, err := sarama.NewClusterAdmin(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "replicated"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignment: map[int32][]int32{0: {1, 2, 3}}}, false); err != nil {
		t.Fatal(err)
	}
	// The broker that answers may learn of the new topic after the controller does: a
	// describe right after the create can find it unknown for a moment.
	var entries []sarama.ConfigEntry
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		entries, err = kafkaconn.TopicConfig(admin, topic, "min.insync.replicas", "unclean.leader.election.enable")
		if err == nil || !errors.Is(err, sarama.ErrUnknownTopicOrPartition) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Value
	}
	if got["min.insync.replicas"] != "2" || got["unclean.leader.election.enable"] != "false" {
		t.Errorf("topic %s: min.insync.replicas %q, unclean.leader.election.enable %q; want 2 and false", topic,
			got["min.insync.replicas"], got["unclean.leader.election.enable"])
	}
	// produce retries for a while: a node lost with the partition's leadership leaves the
	// partition without a leader until the controller elects another, which a loaded
	// machine can take longer than the producer's own retries.
	produce := func(v string) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			var p sarama.SyncProducer
			if p, err = sarama.NewSyncProducer(k.Brokers, kafkaconn.ProducerConfig("testenv")); err != nil {
				continue
			}
			_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)})
			_ = p.Close()
			if err == nil {
				return
			}
		}
		t.Fatalf("produce %s: %v", v, err)
	}
	produce("a")
	replica := filepath.Join(k.DataDir(1), topic+"-0")
	if _, err := os.Stat(replica); err != nil {
		t.Fatalf("node 1 holds no replica of %s-0 before the wipe: %v", topic, err)
	}
	k.WipeNode(t, 1)
	if _, err := os.Stat(replica); !os.IsNotExist(err) {
		t.Fatalf("node 1's replica %s after the wipe: %v, want it gone", replica, err)
	}
	produce("b") // two replicas left: min.insync.replicas is met
	k.StartNode(t, 1)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		metas, err := admin.DescribeTopics([]string{topic})
		var isr []int32
		if err == nil && len(metas) == 1 && len(metas[0].Partitions) == 1 {
			isr = slices.Clone(metas[0].Partitions[0].Isr)
		}
		if slices.Contains(isr, 1) && len(isr) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 not back in the ISR of %s-0 two minutes after its start empty: ISR %v (%v)", topic, isr, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	logs, _ := filepath.Glob(filepath.Join(replica, "*.log"))
	var size int64
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			size += fi.Size()
		}
	}
	if size == 0 {
		t.Fatalf("node 1 is in the ISR but its replica %s holds no records (%v)", replica, logs)
	}
	// Node 1 serves the records: it leads again (the preferred replica, first in the
	// assignment), and a consumer reads from the leader.
	deadline = time.Now().Add(time.Minute)
	for {
		_, err := admin.ElectLeaders(sarama.PreferredElection, map[string][]int32{topic: {0}})
		metas, derr := admin.DescribeTopics([]string{topic})
		if derr == nil && len(metas) == 1 && len(metas[0].Partitions) == 1 && metas[0].Partitions[0].Leader == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 not elected leader of %s-0 again: %v %v", topic, err, derr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c, err := sarama.NewConsumer(k.Brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var vals []string
	for len(vals) < 2 {
		select {
		case m := <-pc.Messages():
			vals = append(vals, string(m.Value))
		case <-time.After(30 * time.Second):
			t.Fatalf("records read from node 1 after its wipe: %q, want a,b", vals)
		}
	}
	if strings.Join(vals, ",") != "a,b" {
		t.Fatalf("records %q, want a,b", vals)
	}
}
