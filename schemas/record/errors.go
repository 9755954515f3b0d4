package record

import "errors"

// Sentinel errors, matched with errors.Is.
var (
	// ErrBadKey reports a record key that does not follow the key grammar.
	ErrBadKey = errors.New("record: malformed key")
	// ErrBadViewName reports a view name outside [A-Za-z_][A-Za-z0-9_.-]*.
	ErrBadViewName = errors.New("record: invalid view name")
	// ErrBadHeader reports a missing or malformed sc-* header.
	ErrBadHeader = errors.New("record: bad header")
	// ErrBadControl reports a control value that does not parse.
	ErrBadControl = errors.New("record: bad control value")
	// ErrBadTime reports a timestamptz, timestamp or date text that is not the record
	// format's spelling of a value (see Time).
	ErrBadTime = errors.New("record: malformed time")
)
