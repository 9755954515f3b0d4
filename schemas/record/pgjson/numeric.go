package pgjson

import (
	"encoding/binary"
	"strconv"
)

// Sign words of PostgreSQL's binary numeric.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

// appendNumeric writes a binary numeric as a JSON string holding PostgreSQL's own text
// output (numeric_out): the exact digits with the value's display scale.
func appendNumeric(dst, src []byte) ([]byte, error) {
	if len(src) < 8 {
		return dst, badData("numeric", src)
	}
	ndigits := int(int16(binary.BigEndian.Uint16(src[0:])))
	weight := int(int16(binary.BigEndian.Uint16(src[2:])))
	sign := binary.BigEndian.Uint16(src[4:])
	dscale := int(binary.BigEndian.Uint16(src[6:]))
	if ndigits < 0 || len(src) != 8+2*ndigits || dscale > 0x3FFF {
		return dst, badData("numeric", src)
	}
	switch sign {
	case numericNaN:
		return append(dst, `"NaN"`...), nil
	case numericPInf:
		return append(dst, `"Infinity"`...), nil
	case numericNInf:
		return append(dst, `"-Infinity"`...), nil
	case numericPos, numericNeg:
	default:
		return dst, badData("numeric", src)
	}
	digit := func(i int) int64 {
		if i < 0 || i >= ndigits {
			return 0
		}
		return int64(binary.BigEndian.Uint16(src[8+2*i:]))
	}
	for i := 0; i < ndigits; i++ {
		if digit(i) > 9999 {
			return dst, badData("numeric", src)
		}
	}
	dst = append(dst, '"')
	if sign == numericNeg {
		dst = append(dst, '-')
	}
	if weight < 0 {
		dst = append(dst, '0')
	} else {
		for i := 0; i <= weight; i++ {
			d := digit(i)
			if i == 0 {
				dst = strconv.AppendInt(dst, d, 10)
				continue
			}
			dst = append(dst, byte('0'+d/1000), byte('0'+d/100%10), byte('0'+d/10%10), byte('0'+d%10))
		}
	}
	if dscale > 0 {
		dst = append(dst, '.')
		for i, n := weight+1, 0; n < dscale; i++ {
			d := digit(i)
			for _, c := range [4]byte{byte('0' + d/1000), byte('0' + d/100%10), byte('0' + d/10%10), byte('0' + d%10)} {
				if n == dscale {
					break
				}
				dst = append(dst, c)
				n++
			}
		}
	}
	return append(dst, '"'), nil
}
