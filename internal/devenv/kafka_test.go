package devenv

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/internal/kafkautil"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// sarama starts a process-wide go-metrics meter goroutine that never stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// TestSaramaAgainstKfake checks what the demo relies on: sarama, with statecast's pinned
// settings (idempotent producer, lz4), can create a compacted topic on kfake, produce and
// consume records with headers and tombstones, and read the topic's config back.
func TestSaramaAgainstKfake(t *testing.T) {
	b, err := StartBroker()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	admin, err := sarama.NewClusterAdmin(b.Addrs(), kafkautil.NewConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	compact := "compact"
	if err := admin.CreateTopic("demo", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatal(err)
	}
	cfgs, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cfgs {
		if c.Name == "cleanup.policy" && c.Value == "compact" {
			found = true
		}
	}
	if !found {
		t.Fatalf("cleanup.policy=compact not described back: %+v", cfgs)
	}

	prod, err := sarama.NewSyncProducer(b.Addrs(), kafkautil.ProducerConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	meta := record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	var msgs []*sarama.ProducerMessage
	for i := range n {
		var val []byte
		if i%10 != 9 {
			val = fmt.Appendf(nil, `{"id":%d}`, i)
		}
		msgs = append(msgs, recordsarama.ProducerMessage("demo", record.EncodeKey("events", fmt.Sprint(i)), val, meta))
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	cons, err := sarama.NewConsumer(b.Addrs(), kafkautil.NewConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("demo", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := range n {
		select {
		case m := <-pc.Messages():
			got, err := recordsarama.Meta(m)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Key) != fmt.Sprintf("events|%d", i) || got.View != "events" || (i%10 == 9) != (m.Value == nil) {
				t.Fatalf("record %d: key %q value %q meta %+v", i, m.Key, m.Value, got)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for record %d", i)
		}
	}
}
