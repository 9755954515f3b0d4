package bench

import (
	"encoding/json"
	"testing"
	"time"
)

func TestPayload(t *testing.T) {
	stamp := time.Unix(1_764_000_000, 123_456_789)
	for _, size := range []int{40, 200, 1024, 10240} {
		p := Payload(size, stamp)
		if len(p) != size {
			t.Errorf("Payload(%d) has %d bytes", size, len(p))
		}
		var v struct {
			T int64  `json:"t"`
			P string `json:"p"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("Payload(%d) is not JSON: %v", size, err)
		}
		if v.T != stamp.UnixNano() {
			t.Errorf("Payload(%d) t = %d, want %d", size, v.T, stamp.UnixNano())
		}
		got, ok := StampOf(p)
		if !ok || !got.Equal(stamp) {
			t.Errorf("StampOf(Payload(%d)) = %v, %v; want %v", size, got, ok, stamp)
		}
	}
	for _, bad := range []string{"", `{"t":12}`, `{"t":abcdefghijklmnopqrs,"p":""}`} {
		if _, ok := StampOf([]byte(bad)); ok {
			t.Errorf("StampOf(%q) ok", bad)
		}
		if n := stampNanos([]byte(bad)); n != 0 {
			t.Errorf("stampNanos(%q) = %d", bad, n)
		}
	}
}
