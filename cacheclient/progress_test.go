package cacheclient

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestSnapshotProgress: while a snapshot is received in several batches, Stats says how
// far it is, the client logs its progress and calls OnSnapshotProgress every
// ProgressInterval; once applied, Stats shows none in progress. The clock is a synctest
// bubble's: the batches come 5 ms apart, the reports every 10 ms exactly.
func TestSnapshotProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fp := startMemFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 100}}}); err != nil {
				return err
			}
			for i := range 10 {
				if err := s.batch(ent(int64(i+1), fmt.Sprint(i), evJSON(i, "a"))); err != nil {
					return err
				}
				if i < 9 {
					time.Sleep(5 * time.Millisecond)
				}
			}
			select {
			case <-release:
			case <-s.s.Context().Done():
				return s.s.Context().Err()
			}
			return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 100}}})
		})
		var logs testenv.LockedBuffer
		var mu sync.Mutex
		var reports []string
		c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t", ProgressInterval: 10 * time.Millisecond},
			memDialer(), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
			WithHooks(Hooks{OnSnapshotProgress: func(position, rows int64, elapsed time.Duration) {
				mu.Lock()
				reports = append(reports, fmt.Sprintf("%d:%d@%v", position, rows, elapsed))
				mu.Unlock()
			}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Register(c, "events", decodeEvent); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		time.Sleep(45 * time.Millisecond) // to the last batch, 9 × 5 ms after the first
		synctest.Wait()
		if s := c.Stats().Snapshot; !s.InProgress || s.Position != 100 || s.Rows != 10 || s.Elapsed != 45*time.Millisecond {
			t.Errorf("Stats().Snapshot = %+v during the snapshot, want at 100 with 10 rows after 45ms", s)
		}
		close(release)
		waitReady(t, c)
		if s := c.Stats().Snapshot; s.InProgress || s.Rows != 0 {
			t.Errorf("Stats().Snapshot = %+v after it was applied", s)
		}
		mu.Lock()
		defer mu.Unlock()
		// Row i+1 comes at 5i ms: the reports are at the rows that reach 10, 20, 30, 40 ms.
		if got, want := fmt.Sprint(reports), "[100:3@10ms 100:5@20ms 100:7@30ms 100:9@40ms]"; got != want {
			t.Errorf("OnSnapshotProgress reports %v, want %v", got, want)
		}
		if out := logs.String(); !strings.Contains(out, `"msg":"snapshot progress"`) || !strings.Contains(out, `"index":100,"rows":`) || !strings.Contains(out, `"rows_per_s":`) {
			t.Errorf("no progress line in the log:\n%s", logs.String())
		}
	})
}
