package parallel

// tracker records the offsets observed, in order, with their completion, and maintains the
// low watermark and a cheap upper bound of the encoded metadata size. Not safe for
// concurrent use: the engine holds its lock.
type tracker struct {
	entries []entry // entries[0] is the watermark entry (not done), unless empty
	headSeq int64   // sequence number of entries[0]
	nextSeq int64
	last    int64 // highest observed offset, -1 before any
	wm      int64 // watermark when entries is empty
	// boundaries counts adjacent entry pairs whose done flags differ.
	boundaries int
	nDone      int // done entries in entries
}

type entry struct {
	off  int64
	done bool
}

func newTracker(start int64) *tracker {
	return &tracker{last: -1, wm: start}
}

// add observes offset off (greater than every earlier one) and returns its sequence number.
func (t *tracker) add(off int64, done bool) int64 {
	if n := len(t.entries); n > 0 && t.entries[n-1].done != done {
		t.boundaries++
	}
	t.entries = append(t.entries, entry{off: off, done: done})
	if done {
		t.nDone++
	}
	t.last = off
	seq := t.nextSeq
	t.nextSeq++
	t.advance()
	return seq
}

// complete marks the entry with sequence seq done.
func (t *tracker) complete(seq int64) {
	i := int(seq - t.headSeq)
	if i < 0 || i >= len(t.entries) || t.entries[i].done {
		return
	}
	before := t.diff(i)
	t.entries[i].done = true
	t.nDone++
	t.boundaries += t.diff(i) - before
	t.advance()
}

func (t *tracker) diff(i int) int {
	d := 0
	if i > 0 && t.entries[i-1].done != t.entries[i].done {
		d++
	}
	if i+1 < len(t.entries) && t.entries[i+1].done != t.entries[i].done {
		d++
	}
	return d
}

func (t *tracker) advance() {
	n := 0
	for n < len(t.entries) && t.entries[n].done {
		n++
	}
	if n == 0 {
		return
	}
	if n < len(t.entries) {
		t.boundaries-- // between the last removed (done) and the new head (not done)
	}
	t.nDone -= n
	t.headSeq += int64(n)
	t.entries = t.entries[n:]
	if len(t.entries) == 0 {
		t.entries = nil // release the backing array
		t.wm = t.last + 1
	}
}

// watermark returns the lowest observed offset not complete, or the highest observed + 1.
func (t *tracker) watermark() int64 {
	if len(t.entries) > 0 {
		return t.entries[0].off
	}
	return t.wm
}

// estimate returns an upper bound of the text size of the encoded metadata.
func (t *tracker) estimate() int {
	if t.nDone == 0 {
		return 0
	}
	span := uint64(t.last + 1 - t.entries[0].off)
	w := uint64(t.entries[0].off)
	hdr := 2 + uvarintLen(w) + uvarintLen(uint64(t.boundaries+1))
	runs := hdr + (t.boundaries+1)*uvarintLen(span)
	bits := 2 + uvarintLen(w) + uvarintLen(span) + int((span+7)/8)
	raw := min(runs, bits)
	return (raw*4 + 2) / 3
}

// checkpoint returns the watermark and the completed ranges above it. Offsets never observed
// between two observed ones take the state of the next observed offset.
func (t *tracker) checkpoint() Checkpoint {
	c := Checkpoint{Watermark: t.watermark()}
	if t.nDone == 0 {
		return c
	}
	prev := c.Watermark - 1
	for _, e := range t.entries {
		if e.done {
			if n := len(c.Completed); n > 0 && c.Completed[n-1].To == prev+1 {
				c.Completed[n-1].To = e.off + 1
			} else {
				c.Completed = append(c.Completed, Range{From: prev + 1, To: e.off + 1})
			}
		}
		prev = e.off
	}
	return c
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
