package cacheclient

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestDecodeFailureIsLoud: a row the decoder refuses (in a snapshot or live) is logged at
// Error level with its view, key and error, counted per view with its key among the most
// recent ones, shown as a hidden row while it is refused, and reported to the hook; a
// later version that decodes brings the row back.
func TestDecodeFailureIsLoud(t *testing.T) {
	var logs testenv.LockedBuffer
	var mu sync.Mutex
	var hooked []string
	checked := make(chan struct{}) // the test read the stats after ack 6: the next batches may come
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), ent(2, "snap-bad", `{"id":"x"}`)); err != nil {
			return err
		}
		if err := s.batch(ent(6, "live-bad", `{bad`)); err != nil {
			return err
		}
		if err := s.waitAck(6); err != nil {
			return err
		}
		<-checked
		var es []*statecastv1.Entry
		for i := range MaxDecodeFailedKeys + 2 {
			es = append(es, ent(int64(10+i), "k"+string(rune('a'+i)), `{bad`))
		}
		if err := s.batch(es...); err != nil {
			return err
		}
		return s.batch(ent(30, "snap-bad", evJSON(2, "a")), ent(31, "ka", ""))
	})
	release := sync.OnceFunc(func() { close(checked) })
	t.Cleanup(release) // before the fake's own clean-up, which waits for this stream
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t"}, WithLogger(logger),
		WithHooks(Hooks{OnDecodeError: func(view, key string, err error) {
			mu.Lock()
			hooked = append(hooked, view+"|"+key)
			mu.Unlock()
		}}))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Register(c, "events", decodeEvent)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitReady(t, c)
	fp.waitFor(t, "ack 6", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 6 })
	vs := c.Stats().Views[0]
	if vs.DecodeErrors != 2 || !slices.Equal(vs.DecodeFailedKeys, []string{"snap-bad", "live-bad"}) || vs.HiddenRows != 2 || v.Len() != 1 {
		t.Fatalf("view stats %+v, len %d", vs, v.Len())
	}
	var found int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["level"] != "ERROR" {
			continue
		}
		if rec["view"] == "events" && (rec["key"] == "snap-bad" || rec["key"] == "live-bad") && rec["err"] != nil {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("%d decode failures logged at Error with view, key and error:\n%s", found, logs.String())
	}
	release()
	fp.waitFor(t, "ack 31", func(_ []*statecastv1.Hello, acks []int64) bool { return lastAck(acks) == 31 })
	vs = c.Stats().Views[0]
	want := []string{"kc", "kd", "ke", "kf", "kg", "kh", "ki", "kj"} // bounded: the most recent, oldest first
	if vs.DecodeErrors != 2+MaxDecodeFailedKeys+2 || !slices.Equal(vs.DecodeFailedKeys, want) {
		t.Fatalf("after more failures: %+v", vs)
	}
	// snap-bad decodes now, ka was deleted: 1 (live-bad) + 9 (kb..kj) rows stay hidden.
	if _, ok := v.Get("snap-bad"); !ok || vs.HiddenRows != 1+MaxDecodeFailedKeys+1 {
		t.Fatalf("hidden rows %d, snap-bad visible %v", vs.HiddenRows, ok)
	}
	if st := c.Stats(); st.DecodeErrors != vs.DecodeErrors {
		t.Fatalf("client decode errors %d, view %d", st.DecodeErrors, vs.DecodeErrors)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != int(vs.DecodeErrors) || hooked[0] != "events|snap-bad" {
		t.Fatalf("hook saw %v", hooked)
	}
}
