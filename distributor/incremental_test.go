package distributor

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestIncBound: what may be a read's watermark, for each incremental type: time values up
// to the read's database clock (in the session's time zone for timestamp and date, with
// half a unit of a rounded timestamp(p)), never 'infinity'; numeric never NaN or Infinity;
// integers always.
func TestIncBound(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := dbClock{at: at, local: at.Add(14 * time.Hour), date: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
	micros := func(t time.Time) []byte {
		return binary.BigEndian.AppendUint64(nil, uint64(t.UnixMicro()-pgEpochUnix*1e6))
	}
	days := func(t time.Time) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(daysSincePgEpoch(t)))
	}
	inf64 := []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ninf64 := []byte{0x80, 0, 0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name   string
		oid    uint32
		typmod int32
		raw    []byte
		want   bool
	}{
		{"timestamptz at the clock", pgtype.TimestamptzOID, -1, micros(at), true},
		{"timestamptz 1µs after", pgtype.TimestamptzOID, -1, micros(at.Add(time.Microsecond)), false},
		{"timestamptz infinity", pgtype.TimestamptzOID, -1, inf64, false},
		{"timestamptz -infinity", pgtype.TimestamptzOID, -1, ninf64, true},
		{"timestamptz(0) rounded up 0.5s", pgtype.TimestamptzOID, 0, micros(at.Add(500 * time.Millisecond)), true},
		{"timestamptz(0) 0.6s after", pgtype.TimestamptzOID, 0, micros(at.Add(600 * time.Millisecond)), false},
		{"timestamptz(3) 0.5ms after", pgtype.TimestamptzOID, 3, micros(at.Add(500 * time.Microsecond)), true},
		{"timestamptz(3) 0.6ms after", pgtype.TimestamptzOID, 3, micros(at.Add(600 * time.Microsecond)), false},
		{"timestamp: the session's wall clock", pgtype.TimestampOID, -1, micros(at.Add(14 * time.Hour)), true},
		{"timestamp: after the session's wall clock", pgtype.TimestampOID, -1, micros(at.Add(14*time.Hour + time.Second)), false},
		{"date: the session's date", pgtype.DateOID, -1, days(clock.date), true},
		{"date: the next day", pgtype.DateOID, -1, days(clock.date.AddDate(0, 0, 1)), false},
		{"date: 1999", pgtype.DateOID, -1, days(time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC)), true},
		{"date infinity", pgtype.DateOID, -1, []byte{0x7f, 0xff, 0xff, 0xff}, false},
		{"int8 max", pgtype.Int8OID, -1, inf64, true},
	} {
		b := newIncBound(tc.oid, tc.typmod, clock)
		if got := b.rawOK(tc.raw); got != tc.want {
			t.Errorf("%s: rawOK = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		oid  uint32
		text string
		want bool
	}{
		{pgtype.TimestamptzOID, "2026-03-01T10:00:00Z", true},
		{pgtype.TimestamptzOID, "2026-03-01T10:00:00.000001Z", false},
		{pgtype.TimestamptzOID, "infinity", false},
		{pgtype.TimestamptzOID, "-infinity", true},
		{pgtype.TimestamptzOID, "10000-01-01T00:00:00Z", false},
		{pgtype.TimestampOID, "2026-03-02T00:00:00", true},
		{pgtype.TimestampOID, "2026-03-02T00:00:00.000001", false},
		{pgtype.DateOID, "2026-03-02", true},
		{pgtype.DateOID, "2026-03-03", false},
		{pgtype.NumericOID, "12.5", true},
		{pgtype.NumericOID, "-Infinity", true},
		{pgtype.NumericOID, "Infinity", false},
		{pgtype.NumericOID, "NaN", false},
		{pgtype.Int8OID, "9223372036854775807", true},
	} {
		if got := newIncBound(tc.oid, -1, clock).textOK(tc.text); got != tc.want {
			t.Errorf("type %d %q: textOK = %v, want %v", tc.oid, tc.text, got, tc.want)
		}
	}
}

// TestIncLessNumeric: numeric's special values order as in PostgreSQL.
func TestIncLessNumeric(t *testing.T) {
	order := []string{"-Infinity", "-5", "0.5", "10", "Infinity", "NaN"}
	for i, a := range order {
		for j, b := range order {
			if got := incLess(pgtype.NumericOID, a, b); got != (i < j) {
				t.Errorf("incLess(%q, %q) = %v", a, b, got)
			}
		}
	}
}

// TestWatermarkSecondsFarFuture: the watermark metric of a time past 2262 (beyond what
// nanoseconds since 1970 hold) is its Unix seconds, not a wrapped negative value.
func TestWatermarkSecondsFarFuture(t *testing.T) {
	want := float64(time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) + 0.5
	if got := watermarkSeconds(pgtype.TimestamptzOID, "2500-01-01T00:00:00.5Z"); got != want {
		t.Fatalf("watermarkSeconds = %f, want %f", got, want)
	}
}
