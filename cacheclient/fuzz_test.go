package cacheclient

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/statecast/statecast/schemas/record"
)

func FuzzReadState(f *testing.F) {
	f.Add(testStateFile(f))
	f.Add([]byte("SCSTATE1"))
	f.Add([]byte("SCSTATE2"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var sink memSink
		head, seen, err := readState(b, "s", nil, &sink)
		if err != nil {
			if !errors.Is(err, ErrStateFile) {
				t.Fatalf("error not wrapping ErrStateFile: %v", err)
			}
			return
		}
		// A file that reads back must re-encode to the same bytes (one view order, one
		// row order: compare contents instead of bytes).
		var caps []viewCapture
		for name := range seen {
			caps = append(caps, captureOf(name, sink.rows[name]))
		}
		var buf bytes.Buffer
		if _, err := writeState(&buf, "s", nil, head, caps); err != nil {
			t.Fatal(err)
		}
		var again memSink
		again2, _, err := readState(buf.Bytes(), "s", nil, &again)
		if err != nil {
			t.Fatalf("re-encoded file rejected: %v", err)
		}
		if again2.index != head.index || again2.topic != head.topic || again2.src.lsn != head.src.lsn || again2.src.seen != head.src.seen ||
			again2.src.hasLSN != head.src.hasLSN || !slices.Equal(again2.src.stale, head.src.stale) {
			t.Fatalf("re-encoded head %+v, read %+v", again2, head)
		}
	})
}

// FuzzRecordKey: for the record key of any row (record.EncodeKey), the client keeps the
// row under Key(parts...), so Get(Key(parts...)) finds it, and SplitKey gives the parts
// back; a record key of another view is refused.
func FuzzRecordKey(f *testing.F) {
	f.Add("events", "1", "")
	f.Add("events", `a|b:c d`, `x\`)
	f.Add("a.b-c", "", "|")
	f.Fuzz(func(t *testing.T, view, a, b string) {
		if !record.ValidViewName(view) {
			return
		}
		c := newTestClient(t)
		v, err := Register(c, view, func(_ string, value []byte) (string, error) { return string(value), nil })
		if err != nil {
			t.Fatal(err)
		}
		r := &receiver{c: c}
		for _, parts := range [][]string{{a}, {a, b}} {
			e := entry{index: 1, view: view, key: record.EncodeKey(view, parts...), value: []byte("v")}
			_, rw, err := r.parseRow(&e)
			if err != nil {
				t.Fatalf("parseRow(%q): %v", e.key, err)
			}
			if rw.key != Key(parts...) {
				t.Fatalf("record key %q kept under %q, want Key(%q) = %q", e.key, rw.key, parts, Key(parts...))
			}
			if got, err := SplitKey(rw.key); err != nil || !slices.Equal(got, parts) {
				t.Fatalf("SplitKey(%q) = %q, %v; want %q", rw.key, got, err, parts)
			}
			if h := v.rowHash(&row{key: rw.key, value: e.value}); h != record.RowHash(e.key, e.value) {
				t.Fatalf("row hash without the record key %x, with it %x", h, record.RowHash(e.key, e.value))
			}
		}
		other := entry{index: 1, view: view, key: record.EncodeKey(view+"x", a)}
		if _, _, err := r.parseRow(&other); err == nil {
			t.Fatalf("record key %q accepted for view %q", other.key, view)
		}
	})
}

// FuzzParseRowKeyView: the client accepts a row entry of a subscribed view exactly when
// its key is a key of that view as record.KeyView decides it — the rule by which the
// player skips foreign rows — so that nothing the player serves is refused.
func FuzzParseRowKeyView(f *testing.F) {
	f.Add("a", []byte("a|1"))
	f.Add("a", []byte("b|1"))
	f.Add("a", []byte(`a\|b|1`))
	f.Add("a.b", []byte("a.b"))
	f.Fuzz(func(t *testing.T, view string, key []byte) {
		if !record.ValidViewName(view) {
			return
		}
		c := newTestClient(t)
		if _, err := Register(c, view, func(_ string, value []byte) (string, error) { return string(value), nil }); err != nil {
			t.Fatal(err)
		}
		r := &receiver{c: c}
		e := entry{index: 1, view: view, key: key, value: []byte("v")}
		_, _, err := r.parseRow(&e)
		kv, kerr := record.KeyView(key)
		if want := kerr == nil && kv == view; (err == nil) != want {
			t.Fatalf("key %q of view %q: parseRow %v, record.KeyView %q, %v", key, view, err, kv, kerr)
		}
	})
}
