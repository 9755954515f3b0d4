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
	// numeric's special values sort as PostgreSQL sorts them: -Infinity < numbers <
	// Infinity < NaN
	if ra, rb := numericRank(a), numericRank(b); ra != 0 || rb != 0 {
		return ra < rb
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

// numericRank places numeric key text among numeric's special values: -1 for -Infinity, 0
// for a number, 1 for Infinity, 2 for NaN.
func numericRank(s string) int {
	switch s {
	case "-Infinity":
		return -1
	case "Infinity":
		return 1
	case "NaN":
		return 2
	}
	return 0
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
		return float64(t.Unix()) + float64(t.Nanosecond())/1e9 // UnixNano wraps past 2262
	}
	f, _ := strconv.ParseFloat(w, 64)
	_ = oid
	return f
}

// dbClock is the database's clock right after a read's snapshot was taken (clock_timestamp()
// in the statement that took it): every row the snapshot sees was committed before it, so no
// row written by an honest clock can carry a later time.
type dbClock struct {
	at    time.Time // the instant
	local time.Time // the instant as a timestamp without time zone in the session's TimeZone (its wall clock, as UTC)
	date  time.Time // the date of that wall clock (midnight UTC)
}

// PostgreSQL's epoch for timestamps and dates: 2000-01-01 00:00:00 UTC.
const pgEpochUnix = 946684800

// incBound is the highest incremental value a read may move the watermark to: the read's
// database clock for time columns (in the column's own binary unit), and no NaN or Infinity
// for numeric. A value beyond it (a time in the future, 'infinity', NaN) is published, but
// as the watermark it would make every later poll find nothing.
type incBound struct {
	oid   uint32
	limit int64 // time columns: µs since pgEpoch (timestamp, timestamptz) or days (date)
}

// newIncBound returns the bound of a read for an incremental column of type oid and type
// modifier typmod (the precision of timestamp(p)).
func newIncBound(oid uint32, typmod int32, c dbClock) incBound {
	b := incBound{oid: oid}
	switch oid {
	case pgtype.TimestamptzOID:
		b.limit = c.at.UnixMicro() - pgEpochUnix*1e6 + roundingSlack(typmod)
	case pgtype.TimestampOID:
		// A timestamp without time zone holds a wall clock: PostgreSQL itself reads it in
		// the session's TimeZone (now()::timestamp, localtimestamp), so the bound is the
		// clock as the distributor's session sees it. Writers in another zone make it
		// off by the difference (docs/operations.md).
		b.limit = c.local.UnixMicro() - pgEpochUnix*1e6 + roundingSlack(typmod)
	case pgtype.DateOID:
		b.limit = daysSincePgEpoch(c.date)
	}
	return b
}

// roundingSlack is half a unit of timestamp(p) with p < 6, in µs: PostgreSQL rounds to the
// column's precision, so a value written just before the snapshot can be that much above
// the clock.
func roundingSlack(typmod int32) int64 {
	if typmod < 0 || typmod >= 6 {
		return 0
	}
	unit := int64(1)
	for range 6 - typmod {
		unit *= 10
	}
	return unit / 2
}

func daysSincePgEpoch(t time.Time) int64 {
	d := t.Unix() - pgEpochUnix
	if d < 0 && d%86400 != 0 {
		return d/86400 - 1
	}
	return d / 86400
}

// rawOK reports whether a binary value of a fixed-width column may be the watermark.
func (b incBound) rawOK(raw []byte) bool {
	switch b.oid {
	case pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID:
		return beInt(raw) <= b.limit
	}
	return true
}

// textOK reports whether key text (a value, or a watermark restored from the topic) may
// be the watermark. Text that does not parse is refused: dropping a watermark only makes
// the next epoch set it again.
func (b incBound) textOK(s string) bool {
	switch b.oid {
	case pgtype.NumericOID:
		return numericRank(s) <= 0
	case pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID:
		if s == "-infinity" {
			return true
		}
		t, err := parseIncTime(s)
		if err != nil {
			return false
		}
		if b.oid == pgtype.DateOID {
			return daysSincePgEpoch(t) <= b.limit
		}
		return t.UnixMicro()-pgEpochUnix*1e6 <= b.limit
	}
	return true
}
