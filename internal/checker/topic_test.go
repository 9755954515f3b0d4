package checker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

func TestReadTopic(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	name := testenv.NewTopic(t, "checker", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("checker-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	hdr := func(view, kind string) []sarama.RecordHeader {
		return []sarama.RecordHeader{
			{Key: []byte("sc-view"), Value: []byte(view)},
			{Key: []byte("sc-kind"), Value: []byte(kind)},
			{Key: []byte("sc-epoch"), Value: []byte("3")},
		}
	}
	msgs := []*sarama.ProducerMessage{
		{Topic: name, Key: sarama.StringEncoder("a|1"), Value: sarama.StringEncoder(`{"id":1}`), Headers: hdr("a", "row")},
		{Topic: name, Key: sarama.StringEncoder("a|1"), Headers: hdr("a", "row")}, // tombstone
		{Topic: name, Key: sarama.StringEncoder("!ctl|a|poll"), Value: sarama.StringEncoder(`{}`), Headers: hdr("a", "poll")},
	}
	for _, m := range msgs {
		if _, _, err := prod.SendMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := ReadTopic(ctx, brokers, name)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{Index: 0, Key: "a|1", View: "a", Kind: "row", Epoch: 3, Value: []byte(`{"id":1}`)},
		{Index: 1, Key: "a|1", View: "a", Kind: "row", Epoch: 3, Tombstone: true},
		{Index: 2, Key: "!ctl|a|poll", View: "a", Kind: "poll", Epoch: 3, Value: []byte(`{}`)},
	}
	if len(got) != len(want) {
		t.Fatalf("ReadTopic = %+v, want %+v", got, want)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
