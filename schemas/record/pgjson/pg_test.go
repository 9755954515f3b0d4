package pgjson

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/record"
)

const everySchema = `
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE every (
	id int PRIMARY KEY, b boolean, i2 smallint, i4 integer, i8 bigint, n numeric, n2 numeric(10,4),
	r real, d double precision, t text, vc varchar(10), c char(3), nm name, ct citext, e mood,
	u uuid, tz timestamptz, ts timestamp, dt date, tm time, iv interval, by bytea, j json, jb jsonb,
	ai int[], at text[], a2 int[][], an numeric[], atz timestamptz[], ae mood[], ac citext[]
);
INSERT INTO every VALUES
(1, true, -32768, 2147483647, -9223372036854775808, 12.3400, 1.5, 1.5, 0.1,
 E'héllo "q" \\ \n ✓ 😀', 'a|b', 'ab', 'nm', 'CiT', 'happy',
 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '2026-11-29 20:25:06.123456+01', '2026-11-29 19:25:06.5',
 '2026-11-29', '15:04:05.25', '1 year 2 mons -3 days 04:05:06.5', '\xdeadbeef',
 '{"b": 1, "a": [1, 2.50]}', '{"b": 1, "a": [1, 2.50]}',
 '{1,NULL,3}', '{"x,y","é"}', '{{1,2},{3,4}}', '{1.10,NaN}', '{"2026-01-01 00:00:00+00",infinity}',
 '{sad,happy}', '{A}'),
(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
(3, false, 0, 0, 0, '123456789012345678901234567890.000000000000000000001', 'NaN', 'NaN', '-Infinity',
 E'tab\there\x01 \u2028', '', '', '', '', 'sad', '00000000-0000-0000-0000-000000000000',
 'infinity', '-infinity', 'infinity', '24:00:00', '0', '', '[]', '"s"',
 '{}', '{NULL}', '{}', '{}', '{}', '{}', '{}'),
(4, true, 1, -1, 1, 'Infinity', '-0.0001', 3.4e38, 1e-7, 'x', 'x', 'x', 'x', 'x', 'happy',
 'ffffffff-ffff-ffff-ffff-ffffffffffff', '1999-12-31 23:59:59.999999+00', '1970-01-01 00:00:00',
 '1999-12-31', '00:00:00', '-1 days +02:00:00', '\x00', '1e400', '{"a": {"b": null}}',
 '{-1}', '{"\\"}', '{{1},{2},{3}}', '{-0.5,1e20,0.000001}', '{NULL}', '{happy}', '{"a|b"}'),
(5, true, 1, 1, 1, '-0.000120', 0, 'Infinity', 1e21, 'x', 'x', 'x', 'x', 'x', 'happy',
 'ffffffff-ffff-ffff-ffff-ffffffffffff', '0001-01-01 00:00:00+00', '2000-02-29 12:00:00.000001',
 '0001-01-01', '23:59:59.999999', '-178000000 years -11 mons -1 days -2562047788:00:54.775807',
 '\x00', '1', '1', '{}', '{}', '{}', '{}', '{}', '{}', '{}');
`

var everyWant = map[int]string{
	1: `{"id":1,"b":true,"i2":-32768,"i4":2147483647,"i8":-9223372036854775808,"n":"12.3400","n2":"1.5000","r":1.5,"d":0.1,` +
		`"t":"héllo \"q\" \\ \n ✓ 😀","vc":"a|b","c":"ab ","nm":"nm","ct":"CiT","e":"happy",` +
		`"u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","tz":"2026-11-29T19:25:06.123456Z","ts":"2026-11-29T19:25:06.5",` +
		`"dt":"2026-11-29","tm":"15:04:05.25","iv":"1 year 2 mons -3 days +04:05:06.5","by":"3q2+7w==",` +
		`"j":{"b": 1, "a": [1, 2.50]},"jb":{"a": [1, 2.50], "b": 1},"ai":[1,null,3],"at":["x,y","é"],"a2":[[1,2],[3,4]],` +
		`"an":["1.10","NaN"],"atz":["2026-01-01T00:00:00Z","infinity"],"ae":["sad","happy"],"ac":["A"]}`,
	2: `{"id":2,"b":null,"i2":null,"i4":null,"i8":null,"n":null,"n2":null,"r":null,"d":null,"t":null,"vc":null,"c":null,` +
		`"nm":null,"ct":null,"e":null,"u":null,"tz":null,"ts":null,"dt":null,"tm":null,"iv":null,"by":null,"j":null,"jb":null,` +
		`"ai":null,"at":null,"a2":null,"an":null,"atz":null,"ae":null,"ac":null}`,
	3: `{"id":3,"b":false,"i2":0,"i4":0,"i8":0,"n":"123456789012345678901234567890.000000000000000000001","n2":"NaN",` +
		`"r":"NaN","d":"-Infinity","t":"tab\there\u0001 \u2028","vc":"","c":"   ","nm":"","ct":"","e":"sad",` +
		`"u":"00000000-0000-0000-0000-000000000000","tz":"infinity","ts":"-infinity","dt":"infinity","tm":"24:00:00",` +
		`"iv":"00:00:00","by":"","j":[],"jb":"s","ai":[],"at":[null],"a2":[],"an":[],"atz":[],"ae":[],"ac":[]}`,
	4: `{"id":4,"b":true,"i2":1,"i4":-1,"i8":1,"n":"Infinity","n2":"-0.0001","r":3.4e+38,"d":1e-7,"t":"x","vc":"x",` +
		`"c":"x  ","nm":"x","ct":"x","e":"happy","u":"ffffffff-ffff-ffff-ffff-ffffffffffff",` +
		`"tz":"1999-12-31T23:59:59.999999Z","ts":"1970-01-01T00:00:00","dt":"1999-12-31","tm":"00:00:00",` +
		`"iv":"-1 days +02:00:00","by":"AA==","j":1e400,"jb":{"a": {"b": null}},"ai":[-1],"at":["\\"],` +
		`"a2":[[1],[2],[3]],"an":["-0.5","100000000000000000000","0.000001"],"atz":[null],"ae":["happy"],"ac":["a|b"]}`,
}

func openEvery(t *testing.T) (context.Context, *pgx.Conn) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, everySchema); err != nil {
		t.Fatal(err)
	}
	return ctx, conn
}

// encodeAll runs sql and returns key and value of every row.
func encodeAll(ctx context.Context, t *testing.T, conn *pgx.Conn, sql, view string, keys []string) (map[int][2]string, error) {
	t.Helper()
	sd, err := conn.Prepare(ctx, "", sql)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := Compile(ctx, conn, sd.Fields, keys)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, sql, ResultFormats)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int][2]string{}
	var kb, vb []byte
	for rows.Next() {
		raw := rows.RawValues()
		if kb, err = enc.AppendKey(kb[:0], view, raw); err != nil {
			return nil, err
		}
		if vb, err = enc.AppendValue(vb[:0], raw); err != nil {
			return nil, err
		}
		id := -1
		if len(raw[0]) == 4 {
			id = int(raw[0][3]) // int4 big-endian, small ids
		}
		out[id] = [2]string{string(kb), string(vb)}
	}
	return out, rows.Err()
}

func TestEveryTypeAgainstPostgres(t *testing.T) {
	ctx, conn := openEvery(t)
	_, err := encodeAll(ctx, t, conn, "SELECT * FROM every ORDER BY id", "every", []string{"vc", "id", "tz"})
	if err == nil {
		t.Fatal("row 2 has NULL key columns: want ErrNullKey")
	}
	if !errors.Is(err, ErrNullKey) {
		t.Fatalf("err = %v, want ErrNullKey", err)
	}
	got, err := encodeAll(ctx, t, conn, "SELECT * FROM every ORDER BY id", "every", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range everyWant {
		v := got[id][1]
		if v != want {
			t.Errorf("row %d:\n got %s\nwant %s", id, v, want)
		}
	}
	for id, kv := range got {
		if !json.Valid([]byte(kv[1])) {
			t.Errorf("row %d: invalid JSON %s", id, kv[1])
		}
	}
	if got[1][0] != "every|1" {
		t.Errorf("key of row 1 = %q", got[1][0])
	}

	// Composite keys with escaping and non-string key types.
	got, err = encodeAll(ctx, t, conn, "SELECT vc, id, tz, u, n, by, ai FROM every WHERE id = 1", "v", []string{"vc", "id", "tz", "u", "n", "by", "ai"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `v|a\|b|1|2026-11-29T19:25:06.123456Z|a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11|12.3400|3q2+7w==|[1,null,3]`; len(got) != 1 || got[-1][0] != want {
		t.Errorf("composite key = %v, want %q", got, want)
	}
}

func TestKeyEscapingOfJSONKeyTexts(t *testing.T) {
	ctx, conn := openEvery(t)
	got, err := encodeAll(ctx, t, conn, "SELECT id, ac, at FROM every WHERE id = 4", "v", []string{"id", "ac", "at"})
	if err != nil {
		t.Fatal(err)
	}
	want := `v|4|["a\|b"]|["\\\\"]`
	if got[4][0] != want {
		t.Fatalf("key = %q, want %q", got[4][0], want)
	}
	view, parts, err := record.DecodeKey([]byte(want))
	if err != nil || view != "v" || len(parts) != 3 || parts[1] != `["a|b"]` || parts[2] != `["\\"]` {
		t.Fatalf("DecodeKey = %q %q %v", view, parts, err)
	}
}

// Domains travel as their base type; enums and citext as text, alone or in arrays.
func TestDomainsAndUserTypes(t *testing.T) {
	ctx, conn := openEvery(t)
	if _, err := conn.Exec(ctx, `CREATE DOMAIN price AS numeric(8,3) CHECK (VALUE > 0);
		CREATE TABLE d (id int, p price, m mood, ms mood[], c citext)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO d VALUES (1, 2.5, 'sad', '{happy,NULL}', 'X|Y')`); err != nil {
		t.Fatal(err)
	}
	got, err := encodeAll(ctx, t, conn, "SELECT * FROM d", "d", []string{"m", "c", "p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range got {
		if kv[0] != `d|sad|X\|Y|2.500` || kv[1] != `{"id":1,"p":"2.500","m":"sad","ms":["happy",null],"c":"X|Y"}` {
			t.Fatalf("got key %s value %s", kv[0], kv[1])
		}
	}
}

// PostgreSQL's own text output is the reference for numeric and interval.
func TestNumericAndIntervalMatchPostgresText(t *testing.T) {
	ctx, conn := openEvery(t)
	if _, err := conn.Exec(ctx, `CREATE TABLE nums AS
		SELECT x::numeric AS n, x::numeric::text AS nt FROM unnest(ARRAY['0','-0','1','-1','0.1','-0.0001','10000','9999.9999',
			'100000000.00000001','1e-20','-1.5e30','123456789.123456789','0.000','1000000000000000000000000000000000000000000000'])
			AS x;
		CREATE TABLE ivs AS SELECT x::interval AS iv, x::interval::text AS it FROM unnest(ARRAY['0','1 sec','-1 sec',
			'1 year','-1 year','13 mons','-13 mons','1 day','-1 day 2 hours','1 day -2 hours','-1 mon +1 day -1 hour',
			'100 hours','-100 hours 0.000001 sec','1.5 sec','2 years 3 mons 4 days 05:06:07.891','-0.5 sec']) AS x`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT n, nt FROM nums", "SELECT iv, it FROM ivs"} {
		sd, err := conn.Prepare(ctx, "", q)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := Compile(ctx, conn, sd.Fields[:1], nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, q, ResultFormats)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			raw := rows.RawValues()
			text, err := enc.AppendKeyText(nil, 0, raw[:1])
			if err != nil {
				t.Fatal(err)
			}
			if string(text) != string(raw[1]) {
				t.Errorf("%s: got %q, PostgreSQL says %q", q, text, raw[1])
			}
			n++
		}
		if rows.Err() != nil || n < 14 {
			t.Fatalf("%s: %d rows, %v", q, n, rows.Err())
		}
	}
}

func TestRefusedTypes(t *testing.T) {
	ctx, conn := openEvery(t)
	tests := []struct {
		sql  string
		keys []string
		want error
		msg  string
	}{
		{"SELECT 1 AS id, point(1,2) AS p", nil, ErrNoMapping, `column "p" has type point with no JSON mapping`},
		{"SELECT 1 AS id, '10:00+02'::timetz AS tt", nil, ErrNoMapping, `column "tt" has type timetz with no JSON mapping`},
		{"SELECT 1 AS id, ARRAY[point(1,2)] AS ps", nil, ErrNoMapping, `column "ps" has type _point with no JSON mapping`},
		{"SELECT row(1,2) AS r", nil, ErrNoMapping, `column "r" has type record with no JSON mapping`},
		{"SELECT 1 AS id, 2 AS id", nil, ErrDuplicateColumn, ""},
		{"SELECT 1 AS id", []string{"nope"}, ErrNoKeyColumn, ""},
	}
	for _, tt := range tests {
		sd, err := conn.Prepare(ctx, "", tt.sql)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Compile(ctx, conn, sd.Fields, tt.keys)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.sql, err, tt.want)
			continue
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("%s: message %q, want %q", tt.sql, err.Error(), tt.msg)
		}
	}
}
