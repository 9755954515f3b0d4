package record

import (
	"errors"
	"slices"
	"testing"
)

func TestEncodeDecodeKey(t *testing.T) {
	tests := []struct {
		view  string
		parts []string
		want  string
	}{
		{"events", []string{"42"}, "events|42"},
		{"m", []string{"a|b", "c"}, `m|a\|b|c`},
		{"m", []string{"a", "b|c"}, `m|a|b\|c`},
		{"m", []string{`back\slash`, ""}, `m|back\\slash|`},
		{"m", []string{`\|`}, `m|\\\|`},
		{"v", []string{"héllo ✓", "2026-11-29T19:25:06Z"}, "v|héllo ✓|2026-11-29T19:25:06Z"},
	}
	for _, tt := range tests {
		got := EncodeKey(tt.view, tt.parts...)
		if string(got) != tt.want {
			t.Errorf("EncodeKey(%q, %q) = %q, want %q", tt.view, tt.parts, got, tt.want)
		}
		view, parts, err := DecodeKey(got)
		if err != nil || view != tt.view || !slices.Equal(parts, tt.parts) {
			t.Errorf("DecodeKey(%q) = %q, %q, %v", got, view, parts, err)
		}
		kv, err := KeyView(got)
		if err != nil || kv != tt.view {
			t.Errorf("KeyView(%q) = %q, %v", got, kv, err)
		}
	}
}

func TestDecodeKeyErrors(t *testing.T) {
	for _, k := range []string{"", "view", `v|a\`, `v|a\b`, `v\x|1`} {
		if _, _, err := DecodeKey([]byte(k)); !errors.Is(err, ErrBadKey) {
			t.Errorf("DecodeKey(%q) err = %v, want ErrBadKey", k, err)
		}
	}
}

func TestValidViewName(t *testing.T) {
	for name, want := range map[string]bool{
		"events": true, "_x": true, "event_markets.v2-b": true, "A9": true,
		"": false, "9a": false, ".a": false, "-a": false, "!ctl": false, "a|b": false, "a b": false, "é": false,
	} {
		if got := ValidViewName(name); got != want {
			t.Errorf("ValidViewName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestControlKey(t *testing.T) {
	for _, k := range []Kind{KindEpochBegin, KindEpochEnd, KindPoll} {
		key := ControlKey("events", k)
		if !IsControlKey(key) {
			t.Fatalf("IsControlKey(%q) = false", key)
		}
		view, kind, err := ParseControlKey(key)
		if err != nil || view != "events" || kind != k {
			t.Fatalf("ParseControlKey(%q) = %q, %q, %v", key, view, kind, err)
		}
	}
	if got := string(ControlKey("events", KindEpochEnd)); got != "!ctl|events|end" {
		t.Fatalf("ControlKey = %q", got)
	}
	if got := string(PositionKey()); got != "!ctl|position" || !IsControlKey(PositionKey()) {
		t.Fatalf("PositionKey = %q", got)
	}
	if view, kind, err := ParseControlKey(PositionKey()); err != nil || view != "" || kind != KindPosition {
		t.Fatalf("ParseControlKey(position) = %q, %q, %v", view, kind, err)
	}
	if IsControlKey(EncodeKey("events", "!ctl")) || IsControlKey([]byte("!ctlx|a|b")) {
		t.Fatal("row key taken for a control key")
	}
	for _, k := range []string{"!ctl|events|other", "!ctl|events", "!ctl|9bad|end", "events|1"} {
		if _, _, err := ParseControlKey([]byte(k)); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseControlKey(%q) err = %v", k, err)
		}
	}
}

func FuzzDecodeKey(f *testing.F) {
	for _, s := range []string{"events|1", `m|a\|b|c`, `m|\\`, "!ctl|v|end", "", "|", `\`, "a||"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		view, parts, err := DecodeKey(key)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error without ErrBadKey: %v", err)
			}
			return
		}
		// Every valid key is the encoding of what it decodes to.
		if again := EncodeKey(view, parts...); string(again) != string(key) {
			t.Fatalf("re-encoding %q gave %q", key, again)
		}
		if kv, err := KeyView(key); err != nil || kv != view {
			t.Fatalf("KeyView(%q) = %q, %v; DecodeKey view %q", key, kv, err, view)
		}
		if IsControlKey(key) != (view == ControlPrefix) {
			t.Fatalf("IsControlKey(%q) disagrees with view %q", key, view)
		}
	})
}

func TestJoinSplitKey(t *testing.T) {
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"42"}, "42"},
		{[]string{"a|b:c d"}, `a\|b:c d`}, // one column is escaped too
		{[]string{`back\slash`}, `back\\slash`},
		{[]string{"a|b", "c"}, `a\|b|c`},
		{[]string{"a", "b|c"}, `a|b\|c`},
		{[]string{""}, ""},
		{[]string{"", ""}, "|"},
		{[]string{"héllo ✓", "2026-11-29T19:25:06Z"}, "héllo ✓|2026-11-29T19:25:06Z"},
	}
	for _, tt := range tests {
		got := JoinKey(tt.parts...)
		if got != tt.want {
			t.Errorf("JoinKey(%q) = %q, want %q", tt.parts, got, tt.want)
		}
		if full, want := string(EncodeKey("v", tt.parts...)), string(KeyPrefix("v"))+got; full != want {
			t.Errorf("EncodeKey(v, %q) = %q, want KeyPrefix + JoinKey = %q", tt.parts, full, want)
		}
		parts, err := SplitKey(got)
		if err != nil || !slices.Equal(parts, tt.parts) {
			t.Errorf("SplitKey(%q) = %q, %v", got, parts, err)
		}
	}
	if got := string(KeyPrefix(`a|b`)); got != `a\|b|` {
		t.Errorf("KeyPrefix = %q", got)
	}
	for _, k := range []string{`a\`, `a\b`, `\x|1`} {
		if _, err := SplitKey(k); !errors.Is(err, ErrBadKey) {
			t.Errorf("SplitKey(%q) err = %v, want ErrBadKey", k, err)
		}
	}
	if n := testing.AllocsPerRun(10, func() { _ = JoinKey("plain") }); n != 0 {
		t.Errorf("JoinKey of one plain part: %v allocations", n)
	}
}

// FuzzSplitKey: every key that splits is the join of its parts.
func FuzzSplitKey(f *testing.F) {
	for _, s := range []string{"", "a", "a|b", `a\|b`, `a\\|b`, `\`, `|`, `a\x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		parts, err := SplitKey(key)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error without ErrBadKey: %v", err)
			}
			return
		}
		if got := JoinKey(parts...); got != key {
			t.Fatalf("JoinKey(SplitKey(%q)) = %q (parts %q)", key, got, parts)
		}
	})
}

// FuzzJoinKey: joined parts split back into the same parts, and a record key is its view's
// prefix followed by the joined parts (what a reader that strips the prefix relies on).
func FuzzJoinKey(f *testing.F) {
	f.Add("events", "a", "b|c")
	f.Add("m", `x\`, "")
	f.Fuzz(func(t *testing.T, view, a, b string) {
		for _, parts := range [][]string{{a}, {a, b}} {
			k := JoinKey(parts...)
			got, err := SplitKey(k)
			if err != nil || !slices.Equal(got, parts) {
				t.Fatalf("SplitKey(JoinKey(%q)) = %q, %v", parts, got, err)
			}
			full := EncodeKey(view, parts...)
			if string(full) != string(KeyPrefix(view))+k {
				t.Fatalf("EncodeKey(%q, %q) = %q, not KeyPrefix + JoinKey = %q", view, parts, full, string(KeyPrefix(view))+k)
			}
			v, dp, err := DecodeKey(full)
			if err != nil || v != view || !slices.Equal(dp, parts) {
				t.Fatalf("DecodeKey(%q) = %q, %q, %v", full, v, dp, err)
			}
		}
	})
}
