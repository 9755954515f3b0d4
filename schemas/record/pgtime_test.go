package record

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
)

func utc(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
}

// Every form the distributor writes, with the value it denotes (astronomical years: 1 BC is
// year 0, 44 BC is -43).
var timeTexts = []struct {
	text string
	want time.Time
	inf  int
	form TimeForm
}{
	{"2026-11-29T19:25:06.123456Z", utc(2026, 11, 29, 19, 25, 6, 123456000), 0, FormTimestamptz},
	{"2026-11-29T19:25:06Z", utc(2026, 11, 29, 19, 25, 6, 0), 0, FormTimestamptz},
	{"2026-11-29T19:25:06.5Z", utc(2026, 11, 29, 19, 25, 6, 5e8), 0, FormTimestamptz},
	{"2026-01-01T00:00:00.000000001Z", utc(2026, 1, 1, 0, 0, 0, 1), 0, FormTimestamptz},
	{"0001-01-01T00:00:00Z", time.Time{}, 0, FormTimestamptz},
	{"0000-12-31T23:59:59.999999Z", utc(0, 12, 31, 23, 59, 59, 999999000), 0, FormTimestamptz},
	{"-0043-03-15T12:00:00Z", utc(-43, 3, 15, 12, 0, 0, 0), 0, FormTimestamptz},
	{"-4713-11-24T00:00:00Z", utc(-4713, 11, 24, 0, 0, 0, 0), 0, FormTimestamptz},
	{"9999-12-31T23:59:59.999999Z", utc(9999, 12, 31, 23, 59, 59, 999999000), 0, FormTimestamptz},
	{"10000-01-01T00:00:00Z", utc(10000, 1, 1, 0, 0, 0, 0), 0, FormTimestamptz},
	{"294276-12-31T23:59:59.999999Z", utc(294276, 12, 31, 23, 59, 59, 999999000), 0, FormTimestamptz},
	{"2026-11-29T19:25:06.5", utc(2026, 11, 29, 19, 25, 6, 5e8), 0, FormTimestamp},
	{"1970-01-01T00:00:00", utc(1970, 1, 1, 0, 0, 0, 0), 0, FormTimestamp},
	{"-0043-03-15T12:00:00", utc(-43, 3, 15, 12, 0, 0, 0), 0, FormTimestamp},
	{"10000-01-01T00:00:00", utc(10000, 1, 1, 0, 0, 0, 0), 0, FormTimestamp},
	{"294276-12-31T23:59:59.999999", utc(294276, 12, 31, 23, 59, 59, 999999000), 0, FormTimestamp},
	{"2026-11-29", utc(2026, 11, 29, 0, 0, 0, 0), 0, FormDate},
	{"2000-02-29", utc(2000, 2, 29, 0, 0, 0, 0), 0, FormDate},
	{"0000-02-29", utc(0, 2, 29, 0, 0, 0, 0), 0, FormDate},
	{"-0004-02-29", utc(-4, 2, 29, 0, 0, 0, 0), 0, FormDate},
	{"-4712-01-01", utc(-4712, 1, 1, 0, 0, 0, 0), 0, FormDate},
	{"5874897-12-31", utc(5874897, 12, 31, 0, 0, 0, 0), 0, FormDate},
	{"infinity", time.Time{}, 1, FormTimestamptz},
	{"-infinity", time.Time{}, -1, FormTimestamptz},
}

func TestTimeForms(t *testing.T) {
	for _, tt := range timeTexts {
		for _, parse := range []struct {
			name string
			fn   func(string) (Time, error)
		}{
			{"ParseTimeValue", ParseTimeValue},
			{"UnmarshalText", func(s string) (v Time, err error) { err = v.UnmarshalText([]byte(s)); return v, err }},
			{"UnmarshalJSON", func(s string) (v Time, err error) { err = v.UnmarshalJSON([]byte(`"` + s + `"`)); return v, err }},
			{"encoding/json", func(s string) (v Time, err error) { err = json.Unmarshal([]byte(`"`+s+`"`), &v); return v, err }},
			{"go-json", func(s string) (v Time, err error) { err = gojson.Unmarshal([]byte(`"`+s+`"`), &v); return v, err }},
		} {
			v, err := parse.fn(tt.text)
			if err != nil {
				t.Errorf("%s(%q): %v", parse.name, tt.text, err)
				continue
			}
			got, finite := v.Time()
			if !got.Equal(tt.want) || got.Location() != time.UTC || finite != (tt.inf == 0) || v.IsInf() != tt.inf || v.Form() != tt.form {
				t.Errorf("%s(%q) = %v finite=%v inf=%d form=%v, want %v inf=%d form=%v",
					parse.name, tt.text, got, finite, v.IsInf(), v.Form(), tt.want, tt.inf, tt.form)
			}
		}
		v, _ := ParseTimeValue(tt.text)
		if s := v.String(); s != tt.text {
			t.Errorf("String of %q = %q", tt.text, s)
		}
		if b, _ := v.MarshalText(); string(b) != tt.text {
			t.Errorf("MarshalText of %q = %q", tt.text, b)
		}
		if b, _ := v.AppendText([]byte("x")); string(b) != "x"+tt.text {
			t.Errorf("AppendText of %q = %q", tt.text, b)
		}
		for name, marshal := range map[string]func(any) ([]byte, error){"encoding/json": json.Marshal, "go-json": gojson.Marshal} {
			if b, err := marshal(v); err != nil || string(b) != `"`+tt.text+`"` {
				t.Errorf("%s.Marshal of %q = %s, %v", name, tt.text, b, err)
			}
		}
	}
}

func TestTimeRefusesOtherSpellings(t *testing.T) {
	for _, s := range []string{
		"", "null", "Infinity", "+infinity", "-Infinity", "infinity ", "-infinityx", "inf",
		"2026-11-29T19:25:06+00:00", "2026-11-29T19:25:06+01:00", "2026-11-29T19:25:06z",
		"2026-11-29T19:25:06.50Z", "2026-11-29T19:25:06.Z", "2026-11-29T19:25:06.", "2026-11-29T19:25:06.1234567890Z",
		"2026-11-29 19:25:06Z", "2026-11-29t19:25:06Z", "2026-11-29T", "2026-11-29T19:25", "2026-11-29T19:25:6Z",
		"2026-11-29Z", " 2026-11-29", "2026-11-29 ", "2026-1-01", "2026-01-1", "26-01-01", "2026/01/01",
		"2026-02-29", "1900-02-29", "-0001-02-29", "2026-13-01", "2026-00-01", "2026-01-00", "2026-04-31", "2026-01-32",
		"2026-11-29T24:00:00Z", "2026-11-29T23:60:00Z", "2026-11-29T23:59:60Z",
		"-0000-01-01", "01000-01-01", "-01000-01-01", "999-01-01", "--0043-01-01", "+2026-01-01",
		"1234567890-01-01", "2026-11-29T19:25:06.5Z\x00", "２026-01-01",
	} {
		if v, err := ParseTimeValue(s); !errors.Is(err, ErrBadTime) {
			t.Errorf("ParseTimeValue(%q) = %v, %v; want ErrBadTime", s, v, err)
		}
	}
	for _, s := range []string{`2026`, `"2026-11-29`, `2026-11-29"`, `"\u0032026-11-29"`, `""`, `"`, `'2026-11-29'`, `["2026-11-29"]`} {
		v := TimeOf(time.Unix(1, 0))
		if err := v.UnmarshalJSON([]byte(s)); !errors.Is(err, ErrBadTime) {
			t.Errorf("UnmarshalJSON(%s) err = %v, want ErrBadTime", s, err)
		}
		if !v.Equal(TimeOf(time.Unix(1, 0))) {
			t.Errorf("UnmarshalJSON(%s) changed the value on error: %v", s, v)
		}
	}
	long := strings.Repeat("9", 1000)
	if _, err := ParseTimeValue(long); err == nil || len(err.Error()) > 120 {
		t.Errorf("error for a long text: %v", err)
	}
}

func TestTimeConstructors(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	at := time.Date(2026, 11, 29, 20, 25, 6, 123456789, paris)
	tests := []struct {
		v    Time
		text string
	}{
		{TimeOf(at), "2026-11-29T19:25:06.123456789Z"},
		{TimestampOf(at), "2026-11-29T20:25:06.123456789"},
		{DateOf(2026, 11, 29), "2026-11-29"},
		{DateOf(-4712, 1, 1), "-4712-01-01"},
		{DateOf(2026, 2, 29), "2026-03-01"},
		{TimeOf(time.Now()), ""}, // monotonic reading dropped
		{Infinity(), "infinity"},
		{NegInfinity(), "-infinity"},
		{Time{}, "0001-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		s := tt.v.String()
		if tt.text != "" && s != tt.text {
			t.Errorf("%#v: %q, want %q", tt.v, s, tt.text)
		}
		back, err := ParseTimeValue(s)
		if err != nil || back != tt.v {
			t.Errorf("%q: parsed back %#v, %v; want %#v", s, back, err, tt.v)
		}
	}
	if got, _ := TimeOf(at).Time(); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("TimeOf(at).Time() = %v", got)
	}
	if !(Time{}).IsZero() || Infinity().IsZero() || NegInfinity().IsZero() || DateOf(2026, 1, 1).IsZero() || !TimeOf(time.Time{}).IsZero() {
		t.Error("IsZero")
	}
	if got, ok := Infinity().Time(); ok || !got.IsZero() {
		t.Errorf("Infinity().Time() = %v, %v", got, ok)
	}
}

func TestTimeCompare(t *testing.T) {
	ordered := []string{
		"-infinity", "-4713-11-24T00:00:00Z", "-0043-03-15T12:00:00", "0000-12-31", "0001-01-01T00:00:00Z",
		"2026-11-29T19:25:06.5Z", "9999-12-31", "10000-01-01T00:00:00Z", "294276-12-31T23:59:59.999999", "5874897-12-31", "infinity",
	}
	vals := make([]Time, len(ordered))
	for i, s := range ordered {
		var err error
		if vals[i], err = ParseTimeValue(s); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range vals {
		for j, b := range vals {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
			if a.Equal(b) != (i == j) {
				t.Errorf("Equal(%s, %s) = %v", a, b, a.Equal(b))
			}
		}
	}
	shuffled := slices.Clone(vals)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, Time.Compare)
	if !slices.Equal(shuffled, vals) {
		t.Errorf("sorted: %v", shuffled)
	}
	// The form does not take part in the order.
	d, _ := ParseTimeValue("2026-11-29")
	ts, _ := ParseTimeValue("2026-11-29T00:00:00")
	tz, _ := ParseTimeValue("2026-11-29T00:00:00Z")
	if !d.Equal(ts) || !ts.Equal(tz) || d == ts {
		t.Errorf("date %v, timestamp %v, timestamptz %v: want Equal, not ==", d, ts, tz)
	}
}

// A typed view's struct: NULL into a pointer, every form, arrays, re-marshalled to the same
// bytes by both decoders the project uses.
func TestTimeInStructs(t *testing.T) {
	type row struct {
		ID  int     `json:"id"`
		At  Time    `json:"at"`
		Opt *Time   `json:"opt"`
		Day Time    `json:"day"`
		All []Time  `json:"all"`
		Nul []*Time `json:"nul"`
	}
	in := `{"id":1,"at":"-0043-03-15T12:00:00Z","opt":null,"day":"-4712-01-01",` +
		`"all":["infinity","-infinity","10000-01-01T00:00:00","294276-12-31T23:59:59.999999Z","5874897-12-31"],` +
		`"nul":[null,"2026-11-29"]}`
	for name, c := range map[string]struct {
		unmarshal func([]byte, any) error
		marshal   func(any) ([]byte, error)
	}{
		"encoding/json": {json.Unmarshal, json.Marshal},
		"go-json":       {gojson.Unmarshal, gojson.Marshal},
	} {
		var r row
		if err := c.unmarshal([]byte(in), &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if at, _ := r.At.Time(); !at.Equal(utc(-43, 3, 15, 12, 0, 0, 0)) || r.Opt != nil || r.Day.Form() != FormDate ||
			r.All[0].IsInf() != 1 || r.All[1].IsInf() != -1 || r.Nul[0] != nil || r.Nul[1].Form() != FormDate {
			t.Errorf("%s: decoded %+v", name, r)
		}
		out, err := c.marshal(r)
		if err != nil || string(out) != in {
			t.Errorf("%s: re-marshalled\n%s, %v\nwant\n%s", name, out, err, in)
		}
		// null into a value leaves it as it was, like time.Time.
		keep := row{At: Infinity()}
		if err := c.unmarshal([]byte(`{"at":null}`), &keep); err != nil || keep.At != Infinity() {
			t.Errorf("%s: null into a Time: %v, %v", name, keep.At, err)
		}
		if err := c.unmarshal([]byte(`{"at":"2026-11-29T19:25:06+01:00"}`), &keep); !errors.Is(err, ErrBadTime) {
			t.Errorf("%s: a foreign spelling: %v", name, err)
		}
	}
	type omit struct {
		At Time `json:"at,omitzero"`
	}
	if b, _ := json.Marshal(omit{}); string(b) != `{}` {
		t.Errorf("omitzero: %s", b)
	}
}

// FuzzParseTimeValue: the parser never panics, and every text it accepts re-marshals to
// itself; a four-digit-year text means what Go's own parser says it means.
func FuzzParseTimeValue(f *testing.F) {
	for _, tt := range timeTexts {
		f.Add(tt.text)
	}
	for _, s := range []string{"2026-11-29T19:25:06.50Z", "-0000-01-01", "2026-02-29", "99999999999999999999-01-01", "2026-11-29T19:25:06.99999999999999999999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseTimeValue(s)
		var j Time
		jerr := j.UnmarshalJSON([]byte(`"` + s + `"`))
		if (err == nil) != (jerr == nil) && !strings.ContainsAny(s, `"`) {
			t.Fatalf("%q: ParseTimeValue %v, UnmarshalJSON %v", s, err, jerr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadTime) {
				t.Fatalf("%q: error without ErrBadTime: %v", s, err)
			}
			return
		}
		if got := v.String(); got != s {
			t.Fatalf("%q re-marshals to %q", s, got)
		}
		if b, _ := v.MarshalJSON(); string(b) != `"`+s+`"` {
			t.Fatalf("%q: MarshalJSON %s", s, b)
		}
		if j != v {
			t.Fatalf("%q: UnmarshalJSON %#v, ParseTimeValue %#v", s, j, v)
		}
		if v.IsInf() != 0 || len(s) < 10 || s[4] != '-' {
			return
		}
		layout := map[TimeForm]string{FormTimestamptz: time.RFC3339Nano, FormTimestamp: layoutTimestamp, FormDate: layoutDate}[v.Form()]
		want, err := time.Parse(layout, s)
		got, _ := v.Time()
		if err != nil || !want.Equal(got) {
			t.Fatalf("%q: %v, time.Parse says %v, %v", s, got, want, err)
		}
	})
}

// FuzzTimeRoundTrip: every time in PostgreSQL's range (and far beyond), in each form,
// parses back from its text to the same value.
func FuzzTimeRoundTrip(f *testing.F) {
	f.Add(int64(0), int64(0), uint8(0))
	f.Add(int64(-210866803200), int64(0), uint8(0)) // 4714-11-24 BC
	f.Add(int64(9224318015999), int64(999999000), uint8(1))
	f.Add(int64(185331720384000), int64(0), uint8(2)) // 5874897-12-31
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), uint8(3))
	f.Fuzz(func(t *testing.T, sec, nsec int64, form uint8) {
		// 3e16 s is about 950 million years: years of at most nine digits.
		const limit = 30_000_000_000_000_000
		if sec > limit || sec < -limit {
			sec %= limit
		}
		at := time.Unix(sec, nsec%1e9)
		var v Time
		switch form % 5 {
		case 0:
			v = TimeOf(at)
		case 1:
			v = TimestampOf(at)
		case 2:
			y, m, d := at.UTC().Date()
			v = DateOf(y, m, d)
		case 3:
			v = Infinity()
		case 4:
			v = NegInfinity()
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Time
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s does not parse back: %v", b, err)
		}
		if back != v {
			t.Fatalf("%s parsed back as %#v, want %#v", b, back, v)
		}
	})
}
