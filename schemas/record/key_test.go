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
