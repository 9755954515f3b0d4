package parallel

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// Range is the half-open offset interval [From, To).
type Range struct{ From, To int64 }

// Checkpoint is what a consumer commits: the watermark (the next offset to read) and the
// offsets above it that are already complete, as sorted, disjoint, non-adjacent ranges, each
// above the watermark.
type Checkpoint struct {
	Watermark int64
	Completed []Range
}

// Contains reports whether offset is complete according to the checkpoint.
func (c *Checkpoint) Contains(offset int64) bool {
	if offset < c.Watermark {
		return true
	}
	lo, hi := 0, len(c.Completed)
	for lo < hi {
		m := (lo + hi) / 2
		if c.Completed[m].To <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(c.Completed) && c.Completed[lo].From <= offset
}

// Metadata format, version 1. The text is base64url (no padding) of:
//
//	byte    version (1)
//	byte    kind: 1 = runs, 2 = bitset
//	uvarint watermark (the committed offset the metadata belongs to)
//	runs:   uvarint n, then n uvarint run lengths, alternating incomplete, complete,
//	        incomplete, ..., starting at the watermark with an incomplete run; each >= 1;
//	        n is even (the last run is complete).
//	bitset: uvarint nbits, then ceil(nbits/8) bytes; bit i (LSB first) set means
//	        watermark+i is complete; bit 0 is clear and bit nbits-1 is set.
//
// The empty string means "no completed offsets above the watermark". The text form is used
// because Kafka stores offset metadata as a string.
const (
	metaVersion = 1
	kindRuns    = 1
	kindBits    = 2
)

var metaEnc = base64.RawURLEncoding

// Encode returns the versioned text form of the completed set, at most max bytes (max <= 0
// means DefaultMaxMetadataBytes); the smaller of the run-length and the bitset forms is
// chosen. When neither fits, the highest completed offsets are left out (they are processed
// again after a restart). Ranges at or below the watermark are ignored.
func (c *Checkpoint) Encode(max int) string {
	if max <= 0 {
		max = DefaultMaxMetadataBytes
	}
	runs := c.runs()
	if len(runs) == 0 {
		return ""
	}
	for len(runs) > 0 {
		r := encodeRuns(c.Watermark, runs)
		if b := encodeBits(c.Watermark, runs); len(b) < len(r) {
			r = b
		}
		if s := metaEnc.EncodeToString(r); len(s) <= max {
			return s
		}
		// Drop the last completed run (and the incomplete run before it); for large
		// overflows drop more at once.
		drop := 2
		if len(runs) > 64 {
			drop = len(runs) / 8 &^ 1
		}
		runs = runs[:len(runs)-drop]
	}
	return ""
}

// runs returns alternating incomplete/complete run lengths, starting at the watermark.
func (c *Checkpoint) runs() []uint64 {
	var runs []uint64
	pos := c.Watermark
	for _, r := range c.Completed {
		from := max(r.From, c.Watermark+1, pos)
		if r.To <= from {
			continue
		}
		if from == pos && len(runs) > 0 {
			runs[len(runs)-1] += uint64(r.To - from)
		} else {
			runs = append(runs, uint64(from-pos), uint64(r.To-from))
		}
		pos = r.To
	}
	return runs
}

func header(w int64, kind byte) []byte {
	b := []byte{metaVersion, kind}
	return binary.AppendUvarint(b, uint64(w))
}

func encodeRuns(w int64, runs []uint64) []byte {
	b := header(w, kindRuns)
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for _, r := range runs {
		b = binary.AppendUvarint(b, r)
	}
	return b
}

func encodeBits(w int64, runs []uint64) []byte {
	var n uint64
	for _, r := range runs {
		n += r
	}
	b := header(w, kindBits)
	if n > 1<<24 {
		return append(b, make([]byte, 1<<21)...) // too large to consider
	}
	b = binary.AppendUvarint(b, n)
	bits := make([]byte, (n+7)/8)
	var pos uint64
	for i, r := range runs {
		if i%2 == 1 {
			for j := pos; j < pos+r; j++ {
				bits[j/8] |= 1 << (j % 8)
			}
		}
		pos += r
	}
	return append(b, bits...)
}

// DecodeCheckpoint decodes metadata committed at offset watermark. Empty metadata gives an
// empty completed set. Malformed metadata, or metadata written for another watermark (for
// example after an offset reset), gives an error wrapping ErrMetadata.
func DecodeCheckpoint(watermark int64, metadata string) (Checkpoint, error) {
	c := Checkpoint{Watermark: watermark}
	if metadata == "" {
		return c, nil
	}
	bad := func(format string, a ...any) (Checkpoint, error) {
		return Checkpoint{Watermark: watermark}, fmt.Errorf("%w: "+format, append([]any{ErrMetadata}, a...)...)
	}
	raw, err := metaEnc.DecodeString(metadata)
	if err != nil {
		return bad("base64: %v", err)
	}
	if len(raw) < 3 {
		return bad("too short")
	}
	if raw[0] != metaVersion {
		return bad("unknown version %d", raw[0])
	}
	kind := raw[1]
	p := raw[2:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	w, ok := next()
	if !ok {
		return bad("watermark")
	}
	if w != uint64(watermark) || watermark < 0 {
		return bad("written for offset %d, committed offset is %d", w, watermark)
	}
	const limit = 1 << 62
	switch kind {
	case kindRuns:
		n, ok := next()
		if !ok || n == 0 || n%2 != 0 || n > uint64(len(p)) {
			return bad("run count")
		}
		pos := uint64(watermark)
		for i := uint64(0); i < n; i++ {
			r, ok := next()
			if !ok || r == 0 || r > limit || pos+r > limit {
				return bad("run %d", i)
			}
			if i%2 == 1 {
				c.Completed = append(c.Completed, Range{From: int64(pos), To: int64(pos + r)})
			}
			pos += r
		}
	case kindBits:
		n, ok := next()
		if !ok || n < 2 || (n+7)/8 != uint64(len(p)) || uint64(watermark)+n > limit {
			return bad("bitset length")
		}
		bit := func(i uint64) bool { return p[i/8]&(1<<(i%8)) != 0 }
		if bit(0) || !bit(n-1) || (n%8 != 0 && p[len(p)-1]>>(n%8) != 0) {
			return bad("bitset bounds")
		}
		for i := uint64(1); i < n; i++ {
			if !bit(i) {
				continue
			}
			off := watermark + int64(i)
			if k := len(c.Completed); k > 0 && c.Completed[k-1].To == off {
				c.Completed[k-1].To++
			} else {
				c.Completed = append(c.Completed, Range{From: off, To: off + 1})
			}
		}
		p = nil
	default:
		return bad("unknown kind %d", kind)
	}
	if len(p) != 0 {
		return bad("%d trailing bytes", len(p))
	}
	return c, nil
}
