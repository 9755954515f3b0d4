package bench

import (
	"fmt"
	"strconv"
	"time"
)

// Payload returns a JSON row of exactly size bytes (at least 40) carrying stamp in
// nanoseconds at a fixed position, so a receiver reads it without a JSON decoder.
func Payload(size int, stamp time.Time) []byte {
	b := make([]byte, 0, size)
	b = append(b, `{"t":`...)
	b = append(b, fmt.Sprintf("%019d", stamp.UnixNano())...)
	b = append(b, `,"p":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// PayloadWith is Payload with a string column "k" holding k after the stamp (a row that a
// filter such as k == "t7" selects).
func PayloadWith(size int, stamp time.Time, k string) []byte {
	b := make([]byte, 0, size)
	b = append(b, `{"t":`...)
	b = append(b, fmt.Sprintf("%019d", stamp.UnixNano())...)
	b = append(b, `,"k":"`...)
	b = append(b, k...)
	b = append(b, `","p":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// StampOf reads the stamp written by Payload.
func StampOf(v []byte) (time.Time, bool) {
	if len(v) < 24 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(string(v[5:24]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// stampNanos is StampOf in unix nanoseconds, 0 when v carries no stamp.
func stampNanos(v []byte) int64 {
	if ts, ok := StampOf(v); ok {
		return ts.UnixNano()
	}
	return 0
}
