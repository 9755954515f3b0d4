package cacheclient

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSnapshotProgress: while a snapshot is received in several batches, Stats says how
// far it is, the client logs its progress and calls OnSnapshotProgress every
// ProgressInterval (never with DisableProgress); once applied, Stats shows none in
// progress.
func TestSnapshotProgress(t *testing.T) {
	t.Run("every ms", func(t *testing.T) { testSnapshotProgress(t, Config{ProgressInterval: time.Millisecond}, true) })
	t.Run("disabled", func(t *testing.T) { testSnapshotProgress(t, Config{DisableProgress: true}, false) })
}

func testSnapshotProgress(t *testing.T, cfg Config, reported bool) {
	release := make(chan struct{})
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 100}}}); err != nil {
			return err
		}
		for i := range 10 {
			if err := s.batch(ent(int64(i+1), fmt.Sprint(i), evJSON(i, "a"))); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		<-release
		return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 100}}})
	})
	var logs syncBuf
	var mu sync.Mutex
	var reports []int64
	cfg.Addresses, cfg.Stream, cfg.Service = []string{fp.addr}, "s", "t"
	c, err := New(cfg,
		WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
		WithHooks(Hooks{OnSnapshotProgress: func(position, rows int64, elapsed time.Duration) {
			if position == 100 && elapsed > 0 {
				mu.Lock()
				reports = append(reports, rows)
				mu.Unlock()
			}
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
	eventually(t, "10 rows received", func() bool { return c.Stats().Snapshot.Rows == 10 })
	if s := c.Stats().Snapshot; !s.InProgress || s.Position != 100 || s.Elapsed <= 0 {
		t.Errorf("Stats().Snapshot = %+v during the snapshot", s)
	}
	close(release)
	waitReady(t, c)
	if s := c.Stats().Snapshot; s.InProgress || s.Rows != 0 {
		t.Errorf("Stats().Snapshot = %+v after it was applied", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reported {
		if len(reports) > 0 || strings.Contains(logs.String(), `"msg":"snapshot progress"`) {
			t.Errorf("progress reported with DisableProgress: %v\n%s", reports, logs.String())
		}
		return
	}
	if len(reports) == 0 || reports[len(reports)-1] > 10 {
		t.Errorf("OnSnapshotProgress reports %v", reports)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"snapshot progress"`) || !strings.Contains(out, `"index":100,"rows":`) || !strings.Contains(out, `"rows_per_s":`) {
		t.Errorf("no progress line in the log:\n%s", logs.String())
	}
}
