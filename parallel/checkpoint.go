package parallel

// Range is the half-open offset interval [From, To).
type Range struct{ From, To int64 }

// Checkpoint is what a consumer commits: the watermark (the next offset to read) and the
// offsets above it that are already complete, as sorted, disjoint, non-adjacent ranges.
type Checkpoint struct {
	Watermark int64
	Completed []Range
}

// Contains reports whether offset is complete according to the checkpoint.
func (c *Checkpoint) Contains(offset int64) bool {
	if offset < c.Watermark {
		return true
	}
	// binary search
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

// Encode returns the versioned text form of the completed set, at most max bytes; when the
// set does not fit, the highest completed offsets are left out.
func (c *Checkpoint) Encode(max int) string { return "" }

// DecodeCheckpoint decodes metadata committed at offset watermark. Empty metadata gives an
// empty completed set. Malformed metadata, or metadata written for another watermark, gives
// an error wrapping ErrMetadata.
func DecodeCheckpoint(watermark int64, metadata string) (Checkpoint, error) {
	return Checkpoint{Watermark: watermark}, nil
}
