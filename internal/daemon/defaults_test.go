package daemon

import (
	"testing"
	"time"
)

// TestDefault: zero takes the default, a positive value stays, a negative one is an error
// naming the field and the value.
func TestDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v, want time.Duration
		wantErr string
	}{
		{"zero", 0, 5 * time.Second, ""},
		{"positive", time.Second, time.Second, ""},
		{"negative", -time.Second, -time.Second, "ack_timeout: -1s is negative (0 takes the default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			err := Default(&v, 5*time.Second, "ack_timeout")
			if v != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
				t.Fatalf("Default(%v) = %v, %v; want %v, %q", tc.v, v, err, tc.want, tc.wantErr)
			}
		})
	}
	n := int16(-2)
	if err := Default(&n, 1, "streams[0].replication_factor"); err == nil || err.Error() != "streams[0].replication_factor: -2 is negative (0 takes the default)" {
		t.Fatalf("int16: %v", err)
	}
}
