package pgjson

import "github.com/jackc/pgx/v5/pgtype"

// A value's JSON is never shorter than a bound that follows from its binary length alone:
// text types are written whole between quotes, bytea as base64, json and jsonb as their
// text, and an array's elements take at least a byte each. MinValueLen and MinKeyLen add
// those bounds up without encoding anything, so that a caller with a size limit refuses a
// row of a huge text or array without first encoding it in full.

// minLenOf returns the lower bound of the JSON length of a non-NULL value of type oid
// (resolved as resolve resolves it) from its binary value src, without decoding it: only
// its length (and an array's dimension count).
func minLenOf(oid uint32, types map[uint32]TypeInfo) func(src []byte) int {
	if s, ok := scalars[oid]; ok {
		return scalarMin(oid, s.isString)
	}
	if elem, ok := arrays[oid]; ok {
		return arrayMin(scalars[elem].isString)
	}
	info := types[oid]
	if info.Elem != 0 {
		e, _ := resolve(info.Elem, types)
		return arrayMin(e.isString)
	}
	r, _ := resolve(oid, types)
	return scalarMin(oid, r.isString)
}

func scalarMin(oid uint32, isString bool) func(src []byte) int {
	switch {
	case isString: // every byte is written (escaped or replaced by more), between quotes
		return func(src []byte) int { return len(src) + 2 }
	case oid == pgtype.ByteaOID:
		return func(src []byte) int { return (len(src)+2)/3*4 + 2 }
	case oid == pgtype.JSONOID:
		return func(src []byte) int { return len(src) }
	case oid == pgtype.JSONBOID: // a version byte, then the text
		return func(src []byte) int { return len(src) - 1 }
	}
	return func([]byte) int { return 1 }
}

// arrayMin bounds an array: after its header (at most 12 + 8 × maxArrayDims bytes) each
// element takes 4 bytes of length and its data, and is written in at least one byte; an
// element of a fixed-width type has at most 20 binary bytes (interval, uuid: 4 + 16), one
// of a variable-length type writes at least as many bytes as its data minus one, and a
// text element its data and two quotes (NULL: 4 bytes, "null"). An array of no dimension
// is [] whatever follows its header.
func arrayMin(elemString bool) func(src []byte) int {
	per := 20
	if elemString {
		per = 3
	}
	return func(src []byte) int {
		if len(src) < 4 || src[0]|src[1]|src[2]|src[3] == 0 {
			return 2
		}
		return max(0, len(src)-12-8*maxArrayDims) / per
	}
}

// MinValueLen returns a lower bound of len(AppendValue(nil, row)) computed from the
// lengths of row's binary values only (row as for AppendValue; a row AppendValue refuses
// has a bound too, which means nothing).
func (e *Encoder) MinValueLen(row [][]byte) int {
	n := 2 // {}
	for i := range e.cols {
		c := &e.cols[i]
		n += len(c.prefix)
		if i >= len(row) || row[i] == nil {
			n += 4 // null
			continue
		}
		n += max(0, c.minLen(row[i]))
	}
	return n
}

// MinKeyLen returns a lower bound of len(AppendKey(nil, view, row)) computed from the
// lengths of row's binary values only.
func (e *Encoder) MinKeyLen(view string, row [][]byte) int {
	n := len(view)
	for _, k := range e.keys {
		n++ // |
		if k >= len(row) || row[k] == nil {
			continue
		}
		c := &e.cols[k]
		if c.isString {
			n += len(row[k]) // escaping only adds
			continue
		}
		n += max(0, c.minLen(row[k])-2) // the key text may drop the JSON quotes
	}
	return n
}
