package distributor

import (
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Incremental column types: time-like columns take a duration overlap, number columns an
// integer overlap.
var incTypes = map[uint32]struct {
	cast   string
	isTime bool
}{
	pgtype.TimestamptzOID: {"timestamptz", true},
	pgtype.TimestampOID:   {"timestamp", true},
	pgtype.DateOID:        {"date", true},
	pgtype.Int2OID:        {"int2", false},
	pgtype.Int4OID:        {"int4", false},
	pgtype.Int8OID:        {"int8", false},
	pgtype.NumericOID:     {"numeric", false},
}

// checkIncremental checks that the incremental column's type can be polled with the
// configured overlap.
func checkIncremental(v *ViewConfig, oid uint32) error {
	t, ok := incTypes[oid]
	if !ok {
		return &ViewError{View: v.Name, Column: v.Incremental, Err: fmt.Errorf("incremental column has type OID %d; want a timestamp, date or integer/numeric version", oid)}
	}
	o := v.overlapFor(t.isTime)
	if o.IsCount && t.isTime && o.Versions != 0 {
		return &ViewError{View: v.Name, Column: v.Incremental, Err: fmt.Errorf("overlap %d is a count but the column is a %s (use a duration)", o.Versions, t.cast)}
	}
	if !o.IsCount && !t.isTime && o.Duration != 0 {
		return &ViewError{View: v.Name, Column: v.Incremental, Err: fmt.Errorf("overlap %s is a duration but the column is a %s (use an integer)", o.Duration, t.cast)}
	}
	return nil
}

// pollQuery returns the incremental query of a view: the rows whose incremental column is
// above watermark − overlap, in increasing order of that column.
func pollQuery(v *ViewConfig, oid uint32, watermark string) (string, []any) {
	t := incTypes[oid]
	col := "_sc." + pgx.Identifier{v.Incremental}.Sanitize()
	if watermark == "" {
		return fmt.Sprintf("SELECT * FROM (%s) AS _sc ORDER BY %s", v.SQL, col), nil
	}
	var cond string
	var args []any
	o := v.overlapFor(t.isTime)
	if t.isTime {
		us := o.Duration.Microseconds()
		cond = fmt.Sprintf("%s > ($1::%s - $2::bigint * interval '1 microsecond')", col, t.cast)
		args = []any{watermark, us}
	} else {
		cond = fmt.Sprintf("%s > ($1::numeric - $2::bigint)", col)
		args = []any{watermark, o.Versions}
	}
	return fmt.Sprintf("SELECT * FROM (%s) AS _sc WHERE %s ORDER BY %s", v.SQL, cond, col), args
}

// incLess reports whether incremental key text a is below b for the column type oid.
// Values that do not parse (e.g. "infinity") compare as strings.
func incLess(oid uint32, a, b string) bool {
	if t, ok := incTypes[oid]; ok && t.isTime {
		ta, ea := parseIncTime(a)
		tb, eb := parseIncTime(b)
		if ea == nil && eb == nil {
			return ta.Before(tb)
		}
		return a < b
	}
	if ia, ea := strconv.ParseInt(a, 10, 64); ea == nil {
		if ib, eb := strconv.ParseInt(b, 10, 64); eb == nil {
			return ia < ib
		}
	}
	ra, oka := new(big.Rat).SetString(a)
	rb, okb := new(big.Rat).SetString(b)
	if oka && okb {
		return ra.Cmp(rb) < 0
	}
	return a < b
}

func parseIncTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time: %q", s)
}

// watermarkSeconds converts a watermark for the metric: unix seconds or the version.
func watermarkSeconds(oid uint32, w string) float64 {
	if t, err := parseIncTime(w); err == nil {
		return float64(t.UnixNano()) / 1e9
	}
	f, _ := strconv.ParseFloat(w, 64)
	_ = oid
	return f
}
