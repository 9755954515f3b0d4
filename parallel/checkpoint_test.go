package parallel

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    Checkpoint
	}{
		{"empty", Checkpoint{Watermark: 7}},
		{"one", Checkpoint{Watermark: 0, Completed: []Range{{2, 3}}}},
		{"runs", Checkpoint{Watermark: 100, Completed: []Range{{101, 150}, {200, 1000}}}},
		{"dense bits", Checkpoint{Watermark: 5, Completed: []Range{{6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}, {16, 17}}}},
		{"large watermark", Checkpoint{Watermark: 1 << 40, Completed: []Range{{1<<40 + 3, 1<<40 + 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.c.Encode(0)
			got, err := DecodeCheckpoint(tt.c.Watermark, s)
			if err != nil {
				t.Fatalf("decode %q: %v", s, err)
			}
			if !reflect.DeepEqual(got, tt.c) {
				t.Fatalf("round trip %+v -> %q -> %+v", tt.c, s, got)
			}
		})
	}
}

func TestCheckpointChoosesSmaller(t *testing.T) {
	// Alternating single offsets: a bitset is smaller than runs.
	alt := Checkpoint{Watermark: 0}
	for i := int64(1); i < 400; i += 2 {
		alt.Completed = append(alt.Completed, Range{i, i + 1})
	}
	raw, _ := metaEnc.DecodeString(alt.Encode(0))
	if raw[1] != kindBits {
		t.Errorf("alternating: kind %d, want bitset", raw[1])
	}
	// Two long runs: runs are smaller.
	long := Checkpoint{Watermark: 0, Completed: []Range{{10, 100000}}}
	raw, _ = metaEnc.DecodeString(long.Encode(0))
	if raw[1] != kindRuns {
		t.Errorf("long run: kind %d, want runs", raw[1])
	}
}

func TestCheckpointTruncatesToBound(t *testing.T) {
	c := Checkpoint{Watermark: 0}
	r := rand.New(rand.NewPCG(1, 2))
	pos := int64(1)
	for range 5000 {
		from := pos + 1 + r.Int64N(1000)
		to := from + 1 + r.Int64N(1000)
		c.Completed = append(c.Completed, Range{from, to})
		pos = to
	}
	for _, limit := range []int{64, 512, 4096} {
		s := c.Encode(limit)
		if len(s) > limit || len(s) == 0 {
			t.Fatalf("limit %d: encoded %d bytes", limit, len(s))
		}
		got, err := DecodeCheckpoint(0, s)
		if err != nil {
			t.Fatal(err)
		}
		// A prefix of the ranges survives: never claims more than was complete.
		if len(got.Completed) == 0 || !reflect.DeepEqual(got.Completed, c.Completed[:len(got.Completed)]) {
			t.Fatalf("limit %d: not a prefix (%d ranges)", limit, len(got.Completed))
		}
	}
}

func TestDecodeCheckpointErrors(t *testing.T) {
	good := (&Checkpoint{Watermark: 10, Completed: []Range{{12, 14}}}).Encode(0)
	tests := []struct {
		name string
		wm   int64
		meta string
	}{
		{"not base64", 10, "!!!"},
		{"short", 10, metaEnc.EncodeToString([]byte{1})},
		{"version", 10, metaEnc.EncodeToString([]byte{9, 1, 10, 2, 1, 1})},
		{"kind", 10, metaEnc.EncodeToString([]byte{1, 9, 10, 2, 1, 1})},
		{"other watermark", 11, good},
		{"odd runs", 10, metaEnc.EncodeToString([]byte{1, 1, 10, 1, 1})},
		{"zero run", 10, metaEnc.EncodeToString([]byte{1, 1, 10, 2, 0, 1})},
		{"trailing", 10, good + "AA"},
		{"bits length", 10, metaEnc.EncodeToString([]byte{1, 2, 10, 20, 0xff})},
		{"bit zero set", 10, metaEnc.EncodeToString([]byte{1, 2, 10, 2, 3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeCheckpoint(tt.wm, tt.meta); !errors.Is(err, ErrMetadata) {
				t.Fatalf("err = %v, want ErrMetadata", err)
			}
		})
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(int64(10), (&Checkpoint{Watermark: 10, Completed: []Range{{12, 14}}}).Encode(0))
	f.Add(int64(0), (&Checkpoint{Watermark: 0, Completed: []Range{{1, 2}, {3, 4}}}).Encode(0))
	f.Add(int64(5), "")
	f.Add(int64(5), strings.Repeat("A", 50))
	f.Fuzz(func(t *testing.T, wm int64, meta string) {
		c, err := DecodeCheckpoint(wm, meta)
		if err != nil {
			return
		}
		prev := c.Watermark
		for _, r := range c.Completed {
			if r.From <= prev || r.To <= r.From {
				t.Fatalf("invalid ranges %+v", c.Completed)
			}
			prev = r.To
		}
		again, err := DecodeCheckpoint(wm, c.Encode(1<<20))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encode: %+v, %v; want %+v", again, err, c)
		}
	})
}

// TestTrackerCheckpoint checks the tracker against a naive model, including gaps and the
// size estimate bound.
func TestTrackerCheckpoint(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 200 {
		tr := newTracker(0)
		var offs []int64
		var seqs []int64
		off := int64(0)
		n := 1 + r.IntN(300)
		for range n {
			off += 1 + r.Int64N(3) // gaps
			offs = append(offs, off)
			seqs = append(seqs, tr.add(off, false))
		}
		done := map[int64]bool{}
		for _, i := range r.Perm(n)[:r.IntN(n+1)] {
			done[offs[i]] = true
			tr.complete(seqs[i])
		}
		// model watermark
		wm := offs[n-1] + 1
		for _, o := range offs {
			if !done[o] {
				wm = o
				break
			}
		}
		c := tr.checkpoint()
		if c.Watermark != wm {
			t.Fatalf("iter %d: watermark %d, want %d", iter, c.Watermark, wm)
		}
		for _, o := range offs {
			if c.Contains(o) != done[o] && o >= wm {
				t.Fatalf("iter %d: offset %d contains=%v done=%v", iter, o, c.Contains(o), done[o])
			}
		}
		s := c.Encode(1 << 20)
		if est := tr.estimate(); len(s) > est {
			t.Fatalf("iter %d: encoded %d > estimate %d", iter, len(s), est)
		}
		back, err := DecodeCheckpoint(wm, s)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("iter %d: decode %v %+v want %+v", iter, err, back, c)
		}
	}
}
