package pgjson

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
)

// appendFunc appends the JSON form of one non-NULL binary value.
type appendFunc func(dst, src []byte) ([]byte, error)

func appendBool(dst, src []byte) ([]byte, error) {
	if len(src) != 1 {
		return dst, badData("boolean", src)
	}
	if src[0] != 0 {
		return append(dst, "true"...), nil
	}
	return append(dst, "false"...), nil
}

func appendInt2(dst, src []byte) ([]byte, error) {
	if len(src) != 2 {
		return dst, badData("smallint", src)
	}
	return strconv.AppendInt(dst, int64(int16(binary.BigEndian.Uint16(src))), 10), nil
}

func appendInt4(dst, src []byte) ([]byte, error) {
	if len(src) != 4 {
		return dst, badData("integer", src)
	}
	return strconv.AppendInt(dst, int64(int32(binary.BigEndian.Uint32(src))), 10), nil
}

func appendInt8(dst, src []byte) ([]byte, error) {
	if len(src) != 8 {
		return dst, badData("bigint", src)
	}
	return strconv.AppendInt(dst, int64(binary.BigEndian.Uint64(src)), 10), nil
}

// appendFloat writes f like encoding/json does, with NaN and ±Inf as strings.
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

func appendFloat4(dst, src []byte) ([]byte, error) {
	if len(src) != 4 {
		return dst, badData("real", src)
	}
	return appendFloat(dst, float64(math.Float32frombits(binary.BigEndian.Uint32(src))), 32), nil
}

func appendFloat8(dst, src []byte) ([]byte, error) {
	if len(src) != 8 {
		return dst, badData("double precision", src)
	}
	return appendFloat(dst, math.Float64frombits(binary.BigEndian.Uint64(src)), 64), nil
}

func appendText(dst, src []byte) ([]byte, error) { return appendString(dst, src), nil }

func appendQChar(dst, src []byte) ([]byte, error) {
	if len(src) > 1 {
		return dst, badData(`"char"`, src)
	}
	return appendString(dst, src), nil
}

func appendBytea(dst, src []byte) ([]byte, error) {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, src)
	return append(dst, '"'), nil
}

func appendUUID(dst, src []byte) ([]byte, error) {
	if len(src) != 16 {
		return dst, badData("uuid", src)
	}
	dst = append(dst, '"')
	for i, b := range src {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xf])
	}
	return append(dst, '"'), nil
}

func appendJSON(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, badData("json", src)
	}
	return append(dst, src...), nil
}

func appendJSONB(dst, src []byte) ([]byte, error) {
	if len(src) < 2 || src[0] != 1 {
		return dst, badData("jsonb", src)
	}
	return append(dst, src[1:]...), nil
}

// PostgreSQL's epoch for timestamps and dates: 2000-01-01 00:00:00 UTC.
const pgEpochUnix = 946684800

// timeOfMicros converts seconds and microseconds apart: microseconds since 1970 overflow
// int64 in PostgreSQL's last ~30 years of timestamps (it holds them up to 294276 AD).
func timeOfMicros(v int64) time.Time { return time.Unix(v/1e6+pgEpochUnix, v%1e6*1e3).UTC() }

func appendTimestamptz(dst, src []byte) ([]byte, error) {
	return appendMicros(dst, src, "timestamptz", time.RFC3339Nano)
}

func appendTimestamp(dst, src []byte) ([]byte, error) {
	return appendMicros(dst, src, "timestamp", "2006-01-02T15:04:05.999999")
}

// PostgreSQL's finite ranges, as binary values: timestamps from 4714-11-24 00:00:00 BC to
// 294276-12-31 23:59:59.999999 (µs since its epoch), dates from 4714-11-24 BC to
// 5874897-12-31 (days). A value outside them is no PostgreSQL value: it is refused as
// malformed rather than written as a time PostgreSQL could not hold.
const (
	minMicros = -211813488000000000
	maxMicros = 9223371331199999999
	minDays   = -2451545
	maxDays   = 2145031948
)

// appendMicros writes a binary timestamp (microseconds since PostgreSQL's epoch, UTC) as a
// JSON string in layout; the two extreme values are PostgreSQL's ±infinity.
func appendMicros(dst, src []byte, typ, layout string) ([]byte, error) {
	if len(src) != 8 {
		return dst, badData(typ, src)
	}
	v := int64(binary.BigEndian.Uint64(src))
	switch {
	case v == math.MaxInt64:
		return append(dst, `"infinity"`...), nil
	case v == math.MinInt64:
		return append(dst, `"-infinity"`...), nil
	case v < minMicros || v > maxMicros:
		return dst, fmt.Errorf("%w: %s %d µs since 2000-01-01 is outside PostgreSQL's range (4714 BC to 294276 AD)", ErrBadData, typ, v)
	}
	dst = append(dst, '"')
	dst = timeOfMicros(v).AppendFormat(dst, layout)
	return append(dst, '"'), nil
}

func appendDate(dst, src []byte) ([]byte, error) {
	if len(src) != 4 {
		return dst, badData("date", src)
	}
	v := int32(binary.BigEndian.Uint32(src))
	switch {
	case v == math.MaxInt32:
		return append(dst, `"infinity"`...), nil
	case v == math.MinInt32:
		return append(dst, `"-infinity"`...), nil
	case v < minDays || v > maxDays:
		return dst, fmt.Errorf("%w: date %d days since 2000-01-01 is outside PostgreSQL's range (4714 BC to 5874897 AD)", ErrBadData, v)
	}
	dst = append(dst, '"')
	dst = time.Date(2000, 1, 1+int(v), 0, 0, 0, 0, time.UTC).AppendFormat(dst, "2006-01-02")
	return append(dst, '"'), nil
}

// appendPad2 appends v (≥ 0) with at least two digits.
func appendPad2(dst []byte, v int64) []byte {
	if v < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, v, 10)
}

// appendSeconds appends ss[.ffffff] (trailing zeros trimmed) for micros ≥ 0 below a minute.
func appendSeconds(dst []byte, micros int64) []byte {
	dst = appendPad2(dst, micros/1e6)
	if f := micros % 1e6; f != 0 {
		var buf [7]byte
		buf[0] = '.'
		for i := 6; i >= 1; i-- {
			buf[i] = byte('0' + f%10)
			f /= 10
		}
		n := 7
		for buf[n-1] == '0' {
			n--
		}
		dst = append(dst, buf[:n]...)
	}
	return dst
}

func appendTime(dst, src []byte) ([]byte, error) {
	if len(src) != 8 {
		return dst, badData("time", src)
	}
	v := int64(binary.BigEndian.Uint64(src))
	if v < 0 || v > 24*3600*1e6 {
		return dst, badData("time", src)
	}
	dst = append(dst, '"')
	dst = appendPad2(dst, v/3600e6)
	dst = append(dst, ':')
	dst = appendPad2(dst, v/60e6%60)
	dst = append(dst, ':')
	dst = appendSeconds(dst, v%60e6)
	return append(dst, '"'), nil
}
