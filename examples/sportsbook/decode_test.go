package sportsbook

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeEvent: the views' decoder (goccy/go-json) gives the same Event as
// encoding/json for every valid UTF-8 input both accept, and never panics. (On invalid
// UTF-8 inside a string encoding/json substitutes U+FFFD and go-json keeps the bytes; record
// values are valid UTF-8 JSON by the record format, schemas/README.md.)
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"id":1000,"competition_id":10,"sport_id":1,"name":"Arsenal v Liverpool","home":"Arsenal","away":"Liverpool","starts_at":"2026-12-01T15:00:00Z","status":"scheduled","tags":["featured"],"info":{"venue":"x","round":1},"updated_at":"2026-11-29T20:00:00.123456Z"}`,
		`{"id":1,"name":"\u00c9\u017e \"q\" \\ /","tags":[],"status":null}`,
		`{"id":-9223372036854775808,"sport_id":9223372036854775807,"tags":null}`,
		`{"ID":5,"Name":"case-insensitive keys","NAME":"last wins"}`,
		`{"id":1.5}`, `{"id":"7"}`, `[]`, `null`, `{"tags":["a",1]}`, `{"name":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := decodeJSON[Event]("k", b)
		var want Event
		werr := json.Unmarshal(b, &want)
		if gerr == nil && werr == nil && utf8.Valid(b) && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: go-json %+v, encoding/json %+v", b, got, want)
		}
	})
}
