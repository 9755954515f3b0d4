package pgjson

import (
	"encoding/json"
	"math/big"
	"reflect"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/statecast/statecast/schemas/record"
)

// The extremes of PostgreSQL's timestamptz, timestamp and date in one table: each literal is
// stored in all three columns (a date drops the time of day).
const timesSchema = `
SET TimeZone = 'UTC';
CREATE TABLE times (id int PRIMARY KEY, tz timestamptz, ts timestamp, d date, atz timestamptz[], ad date[]);
INSERT INTO times SELECT id, v::timestamptz, v::timestamp, v::date, ARRAY[v::timestamptz, NULL], ARRAY[v::date]
FROM (VALUES
	(1, '-infinity'),
	(2, 'infinity'),
	(3, '0044-03-15 12:00:00 BC'),
	(4, '10000-01-01 00:00:00'),
	(5, '294276-12-31 23:59:59.999999'),
	(6, '4713-01-01 BC'),
	(7, '4714-11-24 00:00:00 BC'),
	(8, '0001-12-31 23:59:59.5 BC'),
	(9, '2026-11-29 19:25:06.123456')
) AS x(id, v);
INSERT INTO times VALUES (10, NULL, NULL, '5874897-12-31', NULL, ARRAY['-infinity', NULL]::date[]);
CREATE FUNCTION e(v timestamp) RETURNS numeric LANGUAGE sql AS
	$$ SELECT CASE WHEN isfinite(v) THEN extract(epoch FROM v::date) + extract(epoch FROM v::time) ELSE extract(epoch FROM v) END $$;
CREATE FUNCTION e(v timestamptz) RETURNS numeric LANGUAGE sql AS
	$$ SELECT CASE WHEN isfinite(v) THEN extract(epoch FROM v::date) + extract(epoch FROM v::time) ELSE extract(epoch FROM v) END $$;
`

// What pgjson writes for each row: BC years as negative astronomical years (1 BC is 0000),
// years past 9999 with more digits, infinity spelled as PostgreSQL does.
var timesWant = map[int]string{
	1:  `{"id":1,"tz":"-infinity","ts":"-infinity","d":"-infinity","atz":["-infinity",null],"ad":["-infinity"]}`,
	2:  `{"id":2,"tz":"infinity","ts":"infinity","d":"infinity","atz":["infinity",null],"ad":["infinity"]}`,
	3:  `{"id":3,"tz":"-0043-03-15T12:00:00Z","ts":"-0043-03-15T12:00:00","d":"-0043-03-15","atz":["-0043-03-15T12:00:00Z",null],"ad":["-0043-03-15"]}`,
	4:  `{"id":4,"tz":"10000-01-01T00:00:00Z","ts":"10000-01-01T00:00:00","d":"10000-01-01","atz":["10000-01-01T00:00:00Z",null],"ad":["10000-01-01"]}`,
	5:  `{"id":5,"tz":"294276-12-31T23:59:59.999999Z","ts":"294276-12-31T23:59:59.999999","d":"294276-12-31","atz":["294276-12-31T23:59:59.999999Z",null],"ad":["294276-12-31"]}`,
	6:  `{"id":6,"tz":"-4712-01-01T00:00:00Z","ts":"-4712-01-01T00:00:00","d":"-4712-01-01","atz":["-4712-01-01T00:00:00Z",null],"ad":["-4712-01-01"]}`,
	7:  `{"id":7,"tz":"-4713-11-24T00:00:00Z","ts":"-4713-11-24T00:00:00","d":"-4713-11-24","atz":["-4713-11-24T00:00:00Z",null],"ad":["-4713-11-24"]}`,
	8:  `{"id":8,"tz":"0000-12-31T23:59:59.5Z","ts":"0000-12-31T23:59:59.5","d":"0000-12-31","atz":["0000-12-31T23:59:59.5Z",null],"ad":["0000-12-31"]}`,
	9:  `{"id":9,"tz":"2026-11-29T19:25:06.123456Z","ts":"2026-11-29T19:25:06.123456","d":"2026-11-29","atz":["2026-11-29T19:25:06.123456Z",null],"ad":["2026-11-29"]}`,
	10: `{"id":10,"tz":null,"ts":null,"d":"5874897-12-31","atz":null,"ad":["-infinity",null]}`,
}

// timesRow is a typed view of the times table.
type timesRow struct {
	ID  int            `json:"id"`
	TZ  *record.Time   `json:"tz"`
	TS  *record.Time   `json:"ts"`
	D   *record.Time   `json:"d"`
	ATZ []*record.Time `json:"atz"`
	AD  []*record.Time `json:"ad"`
}

// epochTime turns an exact epoch in seconds as numeric text (up to six decimals,
// "Infinity", "-Infinity") into the instant it names. Microseconds since 1970 overflow
// int64 near PostgreSQL's upper end, so the seconds are split off first.
func epochTime(t *testing.T, s string) record.Time {
	t.Helper()
	switch s {
	case "Infinity":
		return record.Infinity()
	case "-Infinity":
		return record.NegInfinity()
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("epoch %q", s)
	}
	micros := new(big.Rat).Mul(r, big.NewRat(1e6, 1))
	if !micros.IsInt() {
		t.Fatalf("epoch %q is not whole microseconds", s)
	}
	sec, rem := new(big.Int).DivMod(micros.Num(), big.NewInt(1e6), new(big.Int))
	if !sec.IsInt64() {
		t.Fatalf("epoch %q out of range", s)
	}
	return record.TimeOf(time.Unix(sec.Int64(), rem.Int64()*1e3))
}

// Every value PostgreSQL holds, encoded by pgjson, decodes into record.Time (encoding/json
// and goccy/go-json alike) as the exact instant PostgreSQL computes for it, and the typed
// view re-marshals to the very bytes pgjson wrote.
func TestTimesDecodeToTheExactInstant(t *testing.T) {
	ctx, conn := openEvery(t)
	if _, err := conn.Exec(ctx, timesSchema); err != nil {
		t.Fatal(err)
	}
	got, err := encodeAll(ctx, t, conn, "SELECT id, tz, ts, d, atz, ad FROM times ORDER BY id", "times", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(timesWant) {
		t.Fatalf("%d rows, want %d", len(got), len(timesWant))
	}
	for id, want := range timesWant {
		if got[id][1] != want {
			t.Errorf("row %d:\n got %s\nwant %s", id, got[id][1], want)
		}
	}

	// PostgreSQL's own instants, as numeric seconds since 1970 (reading a timestamp or a date
	// as a UTC wall clock, as record.Time does): the epoch of the value's date plus its time
	// of day. extract(epoch) of the timestamp itself is not exact at the upper end (it
	// rounds 294276-12-31 23:59:59.999999 up to the next second).
	rows, err := conn.Query(ctx, `SELECT id, e(tz)::text, e(ts)::text, extract(epoch FROM d)::text FROM times ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[int][3]*string{}
	for rows.Next() {
		var id int
		var e [3]*string
		if err := rows.Scan(&id, &e[0], &e[1], &e[2]); err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]struct {
		unmarshal func([]byte, any) error
		marshal   func(any) ([]byte, error)
	}{
		"encoding/json": {json.Unmarshal, json.Marshal},
		"go-json":       {gojson.Unmarshal, gojson.Marshal},
	} {
		for id, kv := range got {
			var r timesRow
			if err := c.unmarshal([]byte(kv[1]), &r); err != nil {
				t.Errorf("%s: row %d: %v", name, id, err)
				continue
			}
			cols := [3]*record.Time{r.TZ, r.TS, r.D}
			forms := [3]record.TimeForm{record.FormTimestamptz, record.FormTimestamp, record.FormDate}
			for i, e := range epochs[id] {
				v := cols[i]
				if (e == nil) != (v == nil) {
					t.Errorf("%s: row %d column %d: NULL in PostgreSQL %v, decoded %v", name, id, i, e == nil, v)
					continue
				}
				if e == nil {
					continue
				}
				if want := epochTime(t, *e); !v.Equal(want) {
					t.Errorf("%s: row %d column %d: decoded %v, PostgreSQL's instant %v", name, id, i, v, want)
				}
				if v.IsInf() == 0 && v.Form() != forms[i] {
					t.Errorf("%s: row %d column %d: form %v, want %v", name, id, i, v.Form(), forms[i])
				}
			}
			if r.TZ != nil && (len(r.ATZ) != 2 || *r.ATZ[0] != *r.TZ || r.ATZ[1] != nil) {
				t.Errorf("%s: row %d: atz %v, tz %v", name, id, r.ATZ, r.TZ)
			}
			if r.TZ != nil && (len(r.AD) != 1 || *r.AD[0] != *r.D) {
				t.Errorf("%s: row %d: ad %v, d %v", name, id, r.AD, r.D)
			}
			if out, err := c.marshal(r); err != nil || string(out) != kv[1] {
				t.Errorf("%s: row %d re-marshals to\n%s, %v\nnot\n%s", name, id, out, err, kv[1])
			}
		}
	}

	// Key texts: a time key column's key text is the value's text, read by ParseTimeValue.
	keyed, err := encodeAll(ctx, t, conn, "SELECT id, tz, ts, d FROM times WHERE tz IS NOT NULL ORDER BY id", "k", []string{"tz", "ts", "d"})
	if err != nil {
		t.Fatal(err)
	}
	for id, kv := range keyed {
		_, parts, err := record.DecodeKey([]byte(kv[0]))
		if err != nil || len(parts) != 3 {
			t.Fatalf("row %d: key %q: %v", id, kv[0], err)
		}
		var r timesRow
		if err := json.Unmarshal([]byte(kv[1]), &r); err != nil {
			t.Fatal(err)
		}
		for i, want := range []*record.Time{r.TZ, r.TS, r.D} {
			v, err := record.ParseTimeValue(parts[i])
			if err != nil || !reflect.DeepEqual(v, *want) {
				t.Errorf("row %d: key part %q = %v, %v; value has %v", id, parts[i], v, err, want)
			}
		}
	}
}
