package cacheclient

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// bytesAllocated returns the bytes f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeFrameBounded: a 4 MiB frame of empty entries (2 bytes each: 288 MiB of entry
// structs if decoded), or of empty view names, is refused within the client's bounds,
// allocating nothing near what it claims; a frame within the bounds decodes.
func TestDecodeFrameBounded(t *testing.T) {
	const size = 4 << 20
	var batch []byte
	for len(batch) < size-8 {
		batch = protowire.AppendTag(batch, wire.BatchEntries, protowire.BytesType)
		batch = protowire.AppendVarint(batch, 0)
	}
	entries := protowire.AppendBytes(protowire.AppendTag(nil, wire.SubscribeResponseBatch, protowire.BytesType), batch)
	var begin []byte
	for len(begin) < size-8 {
		begin = protowire.AppendTag(begin, wire.SnapshotBeginViews, protowire.BytesType)
		begin = protowire.AppendVarint(begin, 0)
	}
	views := protowire.AppendBytes(protowire.AppendTag(nil, wire.SubscribeResponseSnapshotBegin, protowire.BytesType), begin)

	c := &frameCodec{names: map[string]string{"events": "events"}, maxEntries: DefaultMaxBatchEntries, maxViews: 1}
	for name, b := range map[string][]byte{"empty entries": entries, "empty view names": views} {
		var err error
		alloc := bytesAllocated(func() {
			var f frame
			err = decodeFrame(b, c, &f)
		})
		if !errors.Is(err, errFrameBound) {
			t.Errorf("%s: %v, want errFrameBound", name, err)
		}
		if alloc > 1<<20 {
			t.Errorf("%s: a 4 MiB frame refused after allocating %d bytes", name, alloc)
		}
	}
	// Two Batch fields merge: their entries count together.
	small := protowire.AppendTag(nil, wire.BatchEntries, protowire.BytesType)
	small = protowire.AppendVarint(small, 0)
	one := protowire.AppendBytes(protowire.AppendTag(nil, wire.SubscribeResponseBatch, protowire.BytesType), small)
	var f frame
	if err := decodeFrame(append(append([]byte{}, one...), one...), &frameCodec{maxEntries: 1}, &f); !errors.Is(err, errFrameBound) {
		t.Errorf("two merged one-entry batches with a bound of 1: %v", err)
	}
	if err := decodeFrame(one, &frameCodec{maxEntries: 1}, &f); err != nil || len(f.entries) != 1 {
		t.Errorf("one entry with a bound of 1: %v, %d entries", err, len(f.entries))
	}
}

// TestHelloAsksForTheEntryBound: the client asks the player for batches within its bound.
func TestHelloAsksForTheEntryBound(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error { return s.snapshot(1) })
	c, _ := startClient(t, Config{}, nil, fp)
	waitReady(t, c)
	fp.mu.Lock()
	got := fp.hellos[0].GetMaxBatchEntries()
	fp.mu.Unlock()
	if got != DefaultMaxBatchEntries {
		t.Fatalf("Hello.max_batch_entries %d, want %d", got, DefaultMaxBatchEntries)
	}
}

// TestUserPanicsRecovered: a decoder or an index function that panics on a row (in a
// snapshot, built on worker goroutines, or live) and a change handler that panics do not
// crash the service: the row is refused like a row its decoder refuses (hidden, counted,
// OnDecodeError with a *PanicError), the handler's change like a failed attempt
// (HandlerErrors), every panic counted in Stats.Panics; the other rows are there and
// indexed, and a later version of a refused row that does not panic brings it back.
func TestUserPanicsRecovered(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if err := s.snapshot(5, ent(1, "1", evJSON(1, "a")), ent(2, "dec-snap", evJSON(2, "boom-decode")),
			ent(3, "idx-snap", evJSON(3, "boom-index")), ent(4, "4", evJSON(4, "a"))); err != nil {
			return err
		}
		if err := s.batch(ent(6, "dec-live", evJSON(6, "boom-decode")), ent(7, "idx-live", evJSON(7, "boom-index")),
			ent(8, "8", evJSON(8, "a"))); err != nil {
			return err
		}
		if err := s.waitAck(8); err != nil {
			return err
		}
		return s.batch(ent(9, "dec-snap", evJSON(2, "a")), ent(10, "h", evJSON(10, "boom-handler")))
	})
	var mu sync.Mutex
	var decodeErrs []error
	c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t", BackoffMin: time.Millisecond},
		WithHooks(Hooks{OnDecodeError: func(view, key string, err error) {
			mu.Lock()
			decodeErrs = append(decodeErrs, err)
			mu.Unlock()
		}}))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Register(c, "events", func(key string, b []byte) (event, error) {
		if strings.Contains(string(b), "boom-decode") {
			panic("decoder boom")
		}
		var e event
		return e, json.Unmarshal(b, &e)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("sport", func(e event) []string {
		if e.Sport == "boom-index" {
			var m map[string]int
			//lint:ignore SA5000 a nil map write on purpose: a runtime panic, not one of panic()
			m["x"] = 1
		}
		return []string{e.Sport}
	}); err != nil {
		t.Fatal(err)
	}
	if err := OnChange(v, func(_ context.Context, ch Change[event]) error {
		if ch.New.Sport == "boom-handler" {
			panic("handler boom")
		}
		return nil
	}, WithRetry(2, time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, "the last batch", func() bool { return c.Position() >= 10 })
	eventually(t, "the handler's change to fail", func() bool { return c.Stats().HandlerErrors == 1 })

	for _, k := range []string{"idx-snap", "dec-live", "idx-live"} {
		if _, ok := v.Get(k); ok {
			t.Errorf("row %s whose user code panicked is in the view", k)
		}
	}
	for _, k := range []string{"1", "4", "8", "dec-snap", "h"} {
		if _, ok := v.Get(k); !ok {
			t.Errorf("row %s is missing", k)
		}
	}
	if got := v.ByIndexKeys("sport", "a"); len(got) != 4 {
		t.Errorf("index sport=a holds %v, want 1, 4, 8 and dec-snap", got)
	}
	st := c.Stats()
	// decoder: dec-snap, dec-live; index function: idx-snap, idx-live; handler: 2 attempts.
	if st.Panics != 6 || st.DecodeErrors != 4 {
		t.Errorf("Panics %d, DecodeErrors %d; want 6 and 4", st.Panics, st.DecodeErrors)
	}
	if vs := st.Views[0]; vs.HiddenRows != 3 {
		t.Errorf("hidden rows %d, want 3", vs.HiddenRows)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(decodeErrs) != 4 {
		t.Fatalf("OnDecodeError called %d times, want 4", len(decodeErrs))
	}
	for _, err := range decodeErrs {
		var pe *PanicError
		if !errors.As(err, &pe) || !errors.Is(err, ErrPanic) || pe.Stack == "" {
			t.Errorf("OnDecodeError got %v, want a *PanicError with its stack", err)
		}
	}
}
