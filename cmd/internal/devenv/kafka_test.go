package devenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/cmd/internal/ctl"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// sarama starts a process-wide go-metrics meter goroutine that never stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// TestSaramaAgainstKfake checks what the demo relies on: sarama, with statecast's pinned
// settings (idempotent producer, lz4), can create a compacted topic on kfake, produce and
// consume records with headers and tombstones, and read the topic's config back.
func TestSaramaAgainstKfake(t *testing.T) {
	b, err := StartBroker(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	admin, err := sarama.NewClusterAdmin(b.Addrs(), kafkaconn.NewConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	compact := "compact"
	if err := admin.CreateTopic("demo", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatal(err)
	}
	cfgs, err := kafkaconn.TopicConfig(admin, "demo")
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

	prod, err := sarama.NewSyncProducer(b.Addrs(), kafkaconn.ProducerConfig("devenv-test"))
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

	cons, err := sarama.NewConsumer(b.Addrs(), kafkaconn.NewConfig("devenv-test"))
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

// TestKfakeCompacts checks that the pinned kfake really compacts a compacted topic: after
// many versions of a few keys, a reader sees only a few records, among them the latest
// version of every key. It also pins down one difference from Apache Kafka that readers
// must tolerate on the embedded broker: kfake advances the log start offset past the
// records compaction removed, so a fetch from offset 0 fails with OffsetOutOfRange (Kafka
// keeps the log start and serves the next surviving record); sarama.OffsetOldest works.
func TestKfakeCompacts(t *testing.T) {
	b, err := StartBroker(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	admin, err := sarama.NewClusterAdmin(b.Addrs(), kafkaconn.NewConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	if err := admin.CreateTopic("c", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	prod, err := sarama.NewSyncProducer(b.Addrs(), kafkaconn.ProducerConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	const versions, keys = 20, 3
	for v := range versions {
		for k := range keys { // one batch per message: SendMessage waits for each
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "c", Key: sarama.StringEncoder(fmt.Sprint(k)),
				Value: sarama.StringEncoder(fmt.Sprint(v))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = prod.Close()
	client, err := sarama.NewClient(b.Addrs(), kafkaconn.NewConfig("devenv-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// Records readable from the start, by offset (Tail copes with the moving log start).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	readAll := func() map[int64]string {
		got := map[int64]string{}
		err := ctl.Tail(ctx, ctl.TailOptions{Brokers: b.Addrs(), Topic: "c", From: sarama.OffsetOldest}, func(r ctl.Record) error {
			got[r.Offset] = string(r.Key) + "=" + string(r.Value)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := readAll()
		if len(got) <= 2*keys {
			latest := map[string]bool{}
			for _, kv := range got {
				latest[kv] = true
			}
			for k := range keys {
				if !latest[fmt.Sprintf("%d=%d", k, versions-1)] {
					t.Fatalf("latest version of key %d missing after compaction: %v", k, got)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted: %d records remain", len(got))
		}
		time.Sleep(100 * time.Millisecond)
	}
	start, err := client.GetOffset("c", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	if start == 0 {
		t.Log("kfake now keeps the log start offset at 0 after compaction, like Kafka: update the doc above")
	}
}
