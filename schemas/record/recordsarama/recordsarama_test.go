package recordsarama

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/schemas/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTrip(t *testing.T) {
	m := record.Meta{View: "events", Kind: record.KindEpochEnd, Epoch: 9, SourceTime: time.Unix(1700000000, 5000).UTC(), SourceLSN: "0/1"}
	pm := ProducerMessage("t", record.ControlKey("events", record.KindEpochEnd), nil, m)
	if pm.Value != nil || pm.Partition != 0 {
		t.Fatalf("tombstone value %v partition %d", pm.Value, pm.Partition)
	}
	cm := &sarama.ConsumerMessage{}
	for i := range pm.Headers {
		cm.Headers = append(cm.Headers, &pm.Headers[i])
	}
	got, err := Meta(cm)
	if err != nil {
		t.Fatal(err)
	}
	if got.View != m.View || got.Kind != m.Kind || got.Epoch != m.Epoch || !got.SourceTime.Equal(m.SourceTime) || got.SourceLSN != m.SourceLSN {
		t.Fatalf("got %+v want %+v", got, m)
	}
	if !IsTombstone(cm) {
		t.Fatal("nil value is a tombstone")
	}
}
