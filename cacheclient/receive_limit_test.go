package cacheclient

import (
	"strings"
	"testing"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestMaxReceiveBytes: the client tells the player its receive limit in Hello (the default
// being gRPC's 4 MiB) and enforces it on the subscription: a frame over it ends the stream
// with ResourceExhausted, which Stats reports, while frames under it are applied.
func TestMaxReceiveBytes(t *testing.T) {
	big := `{"id":2,"sport":"` + strings.Repeat("x", 40<<10) + `"}`
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(10, ent(3, "1", evJSON(1, "soccer"))); err != nil {
			return err
		}
		if err := s.waitAck(10); err != nil {
			return err
		}
		return s.batch(ent(11, "2", big))
	})
	c, v := startClient(t, Config{MaxReceiveBytes: 32 << 10}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "a second Hello (the stream ended on the large frame)", func(hellos []*statecastv1.Hello, _ []int64) bool { return len(hellos) >= 2 })
	fp.mu.Lock()
	got := fp.hellos[0].GetMaxMessageBytes()
	fp.mu.Unlock()
	if got != 32<<10 {
		t.Errorf("Hello.max_message_bytes = %d, want 32768", got)
	}
	eventually(t, "Stats.LastError naming the receive limit", func() bool {
		return strings.Contains(c.Stats().LastError, "ResourceExhausted") && strings.Contains(c.Stats().LastError, "32768")
	})
	if _, ok := v.Get("2"); ok {
		t.Fatal("the frame over the receive limit was applied")
	}
	if _, ok := v.Get("1"); !ok {
		t.Fatal("the snapshot under the limit was not applied")
	}

	fp2 := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		return s.snapshot(10, ent(3, "1", evJSON(1, "soccer")), ent(4, "2", big))
	})
	c2, v2 := startClient(t, Config{}, nil, fp2)
	waitReady(t, c2)
	if _, ok := v2.Get("2"); !ok {
		t.Fatal("a 40 KiB row under the default limit was not applied")
	}
	fp2.mu.Lock()
	defer fp2.mu.Unlock()
	if got := fp2.hellos[0].GetMaxMessageBytes(); got != DefaultMaxReceiveBytes {
		t.Errorf("default Hello.max_message_bytes = %d, want %d", got, DefaultMaxReceiveBytes)
	}
}
