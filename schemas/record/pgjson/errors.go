package pgjson

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoMapping: a column's type has no JSON mapping (see TypeError).
	ErrNoMapping = errors.New("pgjson: type has no JSON mapping")
	// ErrNoKeyColumn: a configured key column is not in the result.
	ErrNoKeyColumn = errors.New("pgjson: key column not in the result")
	// ErrDuplicateColumn: two result columns have the same name.
	ErrDuplicateColumn = errors.New("pgjson: duplicate column name")
	// ErrNullKey: a key column is NULL in a row.
	ErrNullKey = errors.New("pgjson: NULL key column")
	// ErrBadData: a raw value does not decode as its type (wrong format or corrupt).
	ErrBadData = errors.New("pgjson: malformed binary value")
)

// TypeError reports a column whose type has no JSON mapping. It matches ErrNoMapping.
type TypeError struct {
	Column string
	Type   string // PostgreSQL type name, or "oid N" when unknown
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("column %q has type %s with no JSON mapping", e.Column, e.Type)
}

// Is makes errors.Is(err, ErrNoMapping) true.
func (e *TypeError) Is(target error) bool { return target == ErrNoMapping }

func badData(typ string, src []byte) error {
	return fmt.Errorf("%w: %s value of %d bytes", ErrBadData, typ, len(src))
}
