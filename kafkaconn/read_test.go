package kafkaconn

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"
)

// TestReadConsumerClosed: when sarama closes the partition consumer before the end offset
// (it does after an offset out of range: retention or DeleteRecords moved the log start
// during the read, and a select may see the closed Messages channel before the error),
// the read fails and names the cause, instead of dereferencing a nil message or returning
// a partial range as complete.
func TestReadConsumerClosed(t *testing.T) {
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
				mpc := c.ExpectConsumePartition("t", 0, 0)
				for range 3 {
					mpc.YieldMessage(&sarama.ConsumerMessage{Key: []byte("k"), Value: []byte("v")})
				}
				if tc.err != nil {
					mpc.YieldError(tc.err)
				}
				mpc.AsyncClose()
				pc, err := c.ConsumePartition("t", 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				var got int64
				err = readPartition(context.Background(), pc, "t", 0, 10, func(*sarama.ConsumerMessage) error {
					got++
					return nil
				}, func(next int64) (int64, error) { return next, nil })
				if err == nil {
					t.Fatalf("read of offsets up to 9 returned nil after %d records and a closed consumer", got)
				}
				if tc.err != nil && !strings.Contains(err.Error(), tc.err.Error()) {
					t.Fatalf("read error %q does not name the cause %q", err, tc.err)
				}
				if tc.err != nil && !errors.Is(err, ErrLogStartMoved) {
					t.Fatalf("read error %q is not ErrLogStartMoved", err)
				}
				if got > 3 {
					t.Fatalf("read passed %d records, 3 were delivered", got)
				}
				_ = c.Close()
			}
		})
	}
}
