package pgjson

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/statecast/statecast/schemas/record"
)

func int8Bytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func int4Bytes(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// PostgreSQL's range ends, as binary values (microseconds or days since 2000-01-01).
func TestTimeExtremes(t *testing.T) {
	tests := []struct {
		fn   appendFunc
		src  []byte
		want string
	}{
		{appendTimestamptz, int8Bytes(-211813488000000000), `"-4713-11-24T00:00:00Z"`}, // 4714-11-24 BC
		{appendTimestamptz, int8Bytes(9223371331199999999), `"294276-12-31T23:59:59.999999Z"`},
		{appendTimestamp, int8Bytes(9223371331199999999), `"294276-12-31T23:59:59.999999"`},
		{appendTimestamptz, int8Bytes(-1), `"1999-12-31T23:59:59.999999Z"`},
		{appendTimestamptz, int8Bytes(math.MaxInt64), `"infinity"`},
		{appendTimestamp, int8Bytes(math.MinInt64), `"-infinity"`},
		{appendDate, int4Bytes(-2451545), `"-4713-11-24"`},
		{appendDate, int4Bytes(2145031948), `"5874897-12-31"`},
		{appendDate, int4Bytes(math.MinInt32), `"-infinity"`},
	}
	for _, tt := range tests {
		got, err := tt.fn(nil, tt.src)
		if err != nil || string(got) != tt.want {
			t.Errorf("%x: %s, %v; want %s", tt.src, got, err, tt.want)
		}
	}
	// Past the ends: no PostgreSQL value, refused (not written as a year PostgreSQL
	// cannot hold, nor wrapped around).
	for _, bad := range []struct {
		fn  appendFunc
		src []byte
	}{
		{appendTimestamptz, int8Bytes(maxMicros + 1)},
		{appendTimestamp, int8Bytes(math.MaxInt64 - 1)},
		{appendTimestamptz, int8Bytes(minMicros - 1)},
		{appendTimestamp, int8Bytes(math.MinInt64 + 1)},
		{appendDate, int4Bytes(maxDays + 1)},
		{appendDate, int4Bytes(minDays - 1)},
	} {
		if got, err := bad.fn(nil, bad.src); !errors.Is(err, ErrBadData) {
			t.Errorf("%x: %s, %v; want ErrBadData", bad.src, got, err)
		}
	}
}

func floorDivMod(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}

// FuzzTimesAsRecordTime: whatever binary timestamp or date pgjson writes, record.Time reads
// back as the same instant and re-marshals to the same bytes.
func FuzzTimesAsRecordTime(f *testing.F) {
	f.Add(int64(0), int32(0), uint8(0))
	f.Add(int64(9223371331199999999), int32(2145031948), uint8(1))
	f.Add(int64(-211813488000000000), int32(-2451545), uint8(2))
	f.Add(int64(math.MaxInt64-1), int32(math.MaxInt32-1), uint8(0))
	f.Add(int64(math.MinInt64+1), int32(math.MinInt32+1), uint8(2))
	f.Fuzz(func(t *testing.T, micros int64, days int32, which uint8) {
		var out []byte
		var err error
		var sec, nsec int64
		form := record.TimeForm(which % 3)
		switch form {
		case record.FormTimestamptz, record.FormTimestamp:
			fn := appendTimestamptz
			if form == record.FormTimestamp {
				fn = appendTimestamp
			}
			out, err = fn(nil, int8Bytes(micros))
			q, r := floorDivMod(micros, 1e6)
			sec, nsec = q+946684800, r*1e3
		case record.FormDate:
			out, err = appendDate(nil, int4Bytes(days))
			sec = (int64(days) + 10957) * 86400
		}
		inRange := micros >= minMicros && micros <= maxMicros || micros == math.MaxInt64 || micros == math.MinInt64
		if form == record.FormDate {
			inRange = days >= minDays && days <= maxDays || days == math.MaxInt32 || days == math.MinInt32
		}
		if !inRange {
			if !errors.Is(err, ErrBadData) {
				t.Fatalf("%d µs / %d days (%s), outside PostgreSQL's range: %s, %v; want ErrBadData", micros, days, form, out, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var v record.Time
		if err := v.UnmarshalJSON(out); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if b, _ := v.MarshalJSON(); string(b) != string(out) {
			t.Fatalf("%s re-marshals to %s", out, b)
		}
		if v.IsInf() != 0 {
			return
		}
		got, _ := v.Time()
		if got.Unix() != sec || int64(got.Nanosecond()) != nsec || v.Form() != form {
			t.Fatalf("%s: %v (%d s %d ns, %v), want %d s %d ns, %v", out, got, got.Unix(), got.Nanosecond(), v.Form(), sec, nsec, form)
		}
	})
}
