package pgjson

import (
	"encoding/binary"
	"strconv"
)

// appendInterval writes a binary interval as a JSON string holding PostgreSQL's text
// output in the default IntervalStyle "postgres" (EncodeInterval, INTSTYLE_POSTGRES), e.g.
// "1 year 2 mons -3 days +04:05:06.5".
func appendInterval(dst, src []byte) ([]byte, error) {
	if len(src) != 16 {
		return dst, badData("interval", src)
	}
	micros := int64(binary.BigEndian.Uint64(src[0:]))
	days := int64(int32(binary.BigEndian.Uint32(src[8:])))
	months := int64(int32(binary.BigEndian.Uint32(src[12:])))

	dst = append(dst, '"')
	isZero, isBefore := true, false
	part := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !isZero {
			dst = append(dst, ' ')
		}
		if isBefore && v > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, v, 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if v != 1 {
			dst = append(dst, 's')
		}
		isBefore = v < 0
		isZero = false
	}
	part(months/12, "year")
	part(months%12, "mon")
	part(days, "day")
	if isZero || micros != 0 {
		if !isZero {
			dst = append(dst, ' ')
		}
		abs := uint64(micros)
		if micros < 0 {
			dst = append(dst, '-')
			abs = uint64(-micros) // two's complement also right for MinInt64
		} else if isBefore {
			dst = append(dst, '+')
		}
		hours := abs / 3600e6
		if hours < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendUint(dst, hours, 10)
		dst = append(dst, ':')
		dst = appendPad2(dst, int64(abs/60e6%60))
		dst = append(dst, ':')
		dst = appendSeconds(dst, int64(abs%60e6))
	}
	return append(dst, '"'), nil
}
