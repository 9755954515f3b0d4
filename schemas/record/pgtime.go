package record

import (
	"fmt"
	"time"
)

// TimeForm says which of PostgreSQL's three time types a Time came from; it fixes the text
// the Time is written as.
type TimeForm uint8

// The forms, one per PostgreSQL type, with the text of a finite value.
const (
	// FormTimestamptz: timestamp with time zone, RFC 3339 in UTC with the fraction's
	// trailing zeros trimmed: "2026-11-29T19:25:06.123456Z". The zero value's form.
	FormTimestamptz TimeForm = iota
	// FormTimestamp: timestamp without time zone, the same without the zone:
	// "2026-11-29T19:25:06.123456".
	FormTimestamp
	// FormDate: date, "2026-11-29".
	FormDate
)

// The Go layouts of the three forms. PostgreSQL values have microseconds; a Time built
// from a time.Time may carry nanoseconds, which are written too rather than lost.
const (
	layoutTimestamptz = time.RFC3339Nano
	layoutTimestamp   = "2006-01-02T15:04:05.999999999"
	layoutDate        = "2006-01-02"
)

// String returns the PostgreSQL type name of the form.
func (f TimeForm) String() string {
	switch f {
	case FormTimestamptz:
		return "timestamptz"
	case FormTimestamp:
		return "timestamp"
	case FormDate:
		return "date"
	}
	return fmt.Sprintf("TimeForm(%d)", uint8(f))
}

// Time holds any value of a PostgreSQL timestamptz, timestamp or date column as a record
// value carries it (schemas/README.md): a finite time of any year — BC years written with
// a minus sign in astronomical numbering ("-0043-03-15T12:00:00Z" is 44 BC), years past
// 9999 with more digits ("10000-01-01T00:00:00Z") — or "infinity" / "-infinity". A typed
// view decodes such columns into a Time where a time.Time would refuse those values (its
// UnmarshalJSON reads four-digit years and RFC 3339 only, so it refuses timestamp and
// date columns altogether). A nullable column decodes into a *Time (nil for NULL).
//
// Text: Time writes exactly the text the distributor writes for its form (MarshalJSON,
// MarshalText, String) and reads exactly that text back (UnmarshalJSON, UnmarshalText,
// ParseTimeValue); the form is taken from the text's shape and kept, so a value
// re-marshals to the bytes it was read from. Other spellings (an offset other than Z,
// "+infinity", fraction digits with trailing zeros, JSON escapes) are refused with
// ErrBadTime: the format has one spelling per value, which is what makes record values
// comparable by their bytes.
//
// Order: Compare puts -infinity before every finite time and infinity after it, and
// orders finite times by instant, a timestamp or date read as a UTC wall clock, so
// the form does not take part ("2026-11-29" equals "2026-11-29T00:00:00"). Use Compare or
// Equal rather than ==, which also compares the form.
//
// The zero Time is the finite timestamptz 0001-01-01T00:00:00Z, like the zero time.Time.
type Time struct {
	t    time.Time // UTC without monotonic reading; zero when infinite
	inf  int8      // +1 infinity, -1 -infinity, 0 finite
	form TimeForm  // FormTimestamptz when infinite: "infinity" is the same text in every form
}

// TimeOf returns t as a finite timestamptz value (the instant; t's location is dropped).
func TimeOf(t time.Time) Time { return Time{t: t.UTC()} }

// TimestampOf returns the wall clock of t (in t's location) as a finite timestamp
// (without time zone) value.
func TimestampOf(t time.Time) Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return Time{t: time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC), form: FormTimestamp}
}

// DateOf returns the date value of the given day (astronomical year numbering: year 0 is
// 1 BC). Out-of-range months and days are normalized as by time.Date.
func DateOf(year int, month time.Month, day int) Time {
	return Time{t: time.Date(year, month, day, 0, 0, 0, 0, time.UTC), form: FormDate}
}

// Infinity returns PostgreSQL's 'infinity', after every finite time.
func Infinity() Time { return Time{inf: 1} }

// NegInfinity returns PostgreSQL's '-infinity', before every finite time.
func NegInfinity() Time { return Time{inf: -1} }

// Time returns the finite time in UTC (a timestamp's or date's wall clock read as UTC, a
// date at midnight) and true, or the zero time.Time and false for ±infinity.
func (t Time) Time() (time.Time, bool) { return t.t, t.inf == 0 }

// IsInf returns +1 for infinity, -1 for -infinity and 0 for a finite time.
func (t Time) IsInf() int { return int(t.inf) }

// Form returns the PostgreSQL type whose text t is written as.
func (t Time) Form() TimeForm { return t.form }

// IsZero reports whether t is the zero Time (so encoding/json's omitzero treats it as
// time.Time's zero value is treated). Infinite values are not zero.
func (t Time) IsZero() bool { return t.inf == 0 && t.t.IsZero() }

// Compare returns -1, 0 or +1 as t is before, equal to or after u: -infinity first,
// infinity last, finite times by instant whatever their form.
func (t Time) Compare(u Time) int {
	switch {
	case t.inf < u.inf:
		return -1
	case t.inf > u.inf:
		return 1
	case t.inf != 0:
		return 0
	}
	return t.t.Compare(u.t)
}

// Equal reports whether t and u are the same point in Compare's order.
func (t Time) Equal(u Time) bool { return t.Compare(u) == 0 }

// AppendText appends the text of t (without JSON quotes) to b.
func (t Time) AppendText(b []byte) ([]byte, error) { return t.appendText(b), nil }

func (t Time) appendText(b []byte) []byte {
	switch t.inf {
	case 1:
		return append(b, "infinity"...)
	case -1:
		return append(b, "-infinity"...)
	}
	switch t.form {
	case FormTimestamp:
		return t.t.AppendFormat(b, layoutTimestamp)
	case FormDate:
		return t.t.AppendFormat(b, layoutDate)
	}
	return t.t.AppendFormat(b, layoutTimestamptz)
}

// String returns the text of t, as the record value and the record key carry it.
func (t Time) String() string { return string(t.appendText(make([]byte, 0, 32))) }

// MarshalText returns the text of t.
func (t Time) MarshalText() ([]byte, error) { return t.appendText(make([]byte, 0, 32)), nil }

// MarshalJSON returns the text of t as a JSON string.
func (t Time) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 34), '"')
	return append(t.appendText(b), '"'), nil
}

// UnmarshalText sets t from its text (ParseTimeValue).
func (t *Time) UnmarshalText(b []byte) error {
	v, err := parseTime(b)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// UnmarshalJSON sets t from a JSON string holding its text. JSON null leaves t unchanged,
// as encoding/json expects (decode a nullable column into a *Time).
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return badTime(b)
	}
	v, err := parseTime(b[1 : len(b)-1])
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseTimeValue reads the text of a timestamptz, timestamp or date value, as a record
// value (without the JSON quotes) or a record key carries it. The form follows from the
// text. Any other text is ErrBadTime. (ParseTime is the headers' RFC 3339 parser.)
func ParseTimeValue(s string) (Time, error) { return parseTime([]byte(s)) }

// maxYearDigits bounds the year so time.Date cannot overflow; PostgreSQL's largest year
// (5874897, a date) has seven digits.
const maxYearDigits = 9

// parseTime reads exactly the canonical text: it refuses anything the writer would not
// produce for the value it denotes, so that every accepted text re-marshals to itself.
func parseTime(s []byte) (Time, error) {
	switch string(s) {
	case "infinity":
		return Infinity(), nil
	case "-infinity":
		return NegInfinity(), nil
	}
	p := s
	neg := len(p) > 0 && p[0] == '-'
	if neg {
		p = p[1:]
	}
	n := 0
	for n < len(p) && isDigit(p[n]) {
		n++
	}
	// At least four digits, no leading zero beyond that padding, and no "-0000" (year
	// zero is 1 BC and written "0000").
	if n < 4 || n > maxYearDigits || n > 4 && p[0] == '0' {
		return Time{}, badTime(s)
	}
	year := 0
	for _, c := range p[:n] {
		year = year*10 + int(c-'0')
	}
	if neg {
		if year == 0 {
			return Time{}, badTime(s)
		}
		year = -year
	}
	p = p[n:]
	month, ok1 := field2(p, '-', 1, 12)
	day, ok2 := field2(p[min(3, len(p)):], '-', 1, 31)
	if !ok1 || !ok2 || day > daysIn(time.Month(month), year) {
		return Time{}, badTime(s)
	}
	p = p[6:]
	if len(p) == 0 {
		return DateOf(year, time.Month(month), day), nil
	}
	hour, ok1 := field2(p, 'T', 0, 23)
	minute, ok2 := field2(p[min(3, len(p)):], ':', 0, 59)
	sec, ok3 := field2(p[min(6, len(p)):], ':', 0, 59)
	if !ok1 || !ok2 || !ok3 {
		return Time{}, badTime(s)
	}
	p = p[9:]
	nsec := 0
	if len(p) > 0 && p[0] == '.' {
		k := 1
		for k < len(p) && isDigit(p[k]) {
			nsec = nsec*10 + int(p[k]-'0')
			k++
		}
		digits := k - 1
		// 1..9 digits, trailing zeros trimmed (RFC3339Nano's and ".999999999"'s rule).
		if digits == 0 || digits > 9 || p[k-1] == '0' {
			return Time{}, badTime(s)
		}
		for range 9 - digits {
			nsec *= 10
		}
		p = p[k:]
	}
	form := FormTimestamp
	switch string(p) {
	case "":
	case "Z":
		form = FormTimestamptz
	default:
		return Time{}, badTime(s)
	}
	return Time{t: time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), form: form}, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// field2 reads sep followed by two digits at the start of p, within [lo, hi].
func field2(p []byte, sep byte, lo, hi int) (int, bool) {
	if len(p) < 3 || p[0] != sep || !isDigit(p[1]) || !isDigit(p[2]) {
		return 0, false
	}
	v := int(p[1]-'0')*10 + int(p[2]-'0')
	return v, lo <= v && v <= hi
}

// daysIn returns the days of month in year of the proleptic Gregorian calendar that both
// PostgreSQL and Go use (astronomical years: 0 and -4 are leap years).
func daysIn(m time.Month, year int) int {
	switch m {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func badTime(s []byte) error {
	const limit = 64 // the text lands in logs of decode failures
	if len(s) > limit {
		return fmt.Errorf("%w: %q…", ErrBadTime, s[:limit])
	}
	return fmt.Errorf("%w: %q", ErrBadTime, s)
}
