package record

import (
	"fmt"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// RowHash is xxhash64(key || 0x00 || value), the hash of one live row.
func RowHash(key, value []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(key)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(value)
	return d.Sum64()
}

// RowHashPrefixed is RowHash(prefix+key, value) computed without building the record key:
// for a reader that holds a row's key within its view (see JoinKey) beside the view's
// KeyPrefix. It does not allocate.
func RowHashPrefixed(prefix []byte, key string, value []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(prefix)
	_, _ = d.WriteString(key)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(value)
	return d.Sum64()
}

// EpochHash is the order-independent hash of a set of rows: the sum of their row hashes
// mod 2^64, plus the row count. The zero value is the empty set. Not safe for concurrent use.
type EpochHash struct {
	sum  uint64
	rows int64
}

// Add adds the row with hash h (see RowHash).
func (e *EpochHash) Add(h uint64) { e.sum += h; e.rows++ }

// Remove removes a row previously added with hash h.
func (e *EpochHash) Remove(h uint64) { e.sum -= h; e.rows-- }

// Replace replaces a row's old hash by its new one (same key, new value).
func (e *EpochHash) Replace(old, new uint64) { e.sum += new - old }

// Sum returns the hash of the set.
func (e *EpochHash) Sum() uint64 { return e.sum }

// Rows returns the number of rows in the set.
func (e *EpochHash) Rows() int64 { return e.rows }

// FormatHash writes h as 16 lower-case hex digits, as epoch-end values carry it.
func FormatHash(h uint64) string {
	s := strconv.FormatUint(h, 16)
	const zeros = "0000000000000000"
	return zeros[:16-len(s)] + s
}

// ParseHash parses 16 hex digits written by FormatHash.
func ParseHash(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("%w: hash %q is not 16 hex digits", ErrBadControl, s)
	}
	h, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: hash %q is not 16 hex digits", ErrBadControl, s)
	}
	return h, nil
}
