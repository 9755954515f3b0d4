package distributor

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestRestoreConsumerClosed: when sarama closes the restore's partition consumer before
// the end offset (it does after an offset out of range: retention or DeleteRecords moved
// the log start during the read, and a select may see the closed Messages channel before
// the error), the restore fails — it is retried from the new log start — instead of
// dereferencing a nil message or returning a partial state as complete.
func TestRestoreConsumerClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"after an offset out of range", sarama.ErrOffsetOutOfRange},
		{"without an error", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // the order in which a select sees the two channels is random
				c := mocks.NewConsumer(t, nil)
				pc := c.ExpectConsumePartition("t", 0, 0)
				for i := range 3 {
					key := record.EncodeKey("items", string(rune('a'+i)))
					pm := recordsarama.ProducerMessage("t", key, []byte(`{"id":1}`), record.Meta{View: "items", Kind: record.KindRow, Epoch: 1})
					hs := make([]*sarama.RecordHeader, len(pm.Headers))
					for j := range pm.Headers {
						hs[j] = &pm.Headers[j]
					}
					pc.YieldMessage(&sarama.ConsumerMessage{Key: key, Value: []byte(`{"id":1}`), Headers: hs})
				}
				if tc.err != nil {
					pc.YieldError(tc.err)
				}
				pc.AsyncClose()
				p, err := c.ConsumePartition("t", 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				views := map[string]*viewState{"items": newViewState(&ViewConfig{Name: "items"})}
				var pos string
				n, err := restoreFrom(context.Background(), p, "t", 10, views, &pos, slog.New(slog.DiscardHandler))
				if err == nil {
					t.Fatalf("restore of offsets up to 9 returned nil after %d records and a closed consumer", n)
				}
				if tc.err != nil && !strings.Contains(err.Error(), tc.err.Error()) {
					t.Fatalf("restore error %q does not name the cause %q", err, tc.err)
				}
				if n > 3 || int64(len(views["items"].hashes)) != n {
					t.Fatalf("restore applied %d records, state holds %d rows", n, len(views["items"].hashes))
				}
				_ = c.Close()
			}
		})
	}
}
