package pgjson

import (
	"encoding/json"
	"strings"
	"testing"
)

// A json/jsonb value that is JSON null and an SQL NULL encode alike: the record value has no
// way to tell them apart (schemas/README.md, "json null and SQL NULL"). Nested nulls are
// kept, and a view that needs the difference selects it as a column of its own.
func TestJSONNullCollapsesWithSQLNull(t *testing.T) {
	ctx, conn := openEvery(t)
	if _, err := conn.Exec(ctx, `
		CREATE TABLE jn (id int PRIMARY KEY, j json, jb jsonb, aj json[], ajb jsonb[]);
		INSERT INTO jn VALUES
			(1, 'null', 'null', ARRAY['null'::json], ARRAY['null'::jsonb]),
			(2, NULL, NULL, ARRAY[NULL::json], ARRAY[NULL::jsonb]),
			(3, ' null ', ' null ', NULL, NULL),
			(4, '{"a": null}', '{"a": null}', '{}', '{}')`); err != nil {
		t.Fatal(err)
	}
	got, err := encodeAll(ctx, t, conn, "SELECT id, j, jb, aj, ajb, j IS NULL AS j_missing, jb IS NULL AS jb_missing FROM jn ORDER BY id", "jn", []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{
		1: `{"id":1,"j":null,"jb":null,"aj":[null],"ajb":[null],"j_missing":false,"jb_missing":false}`,
		2: `{"id":2,"j":null,"jb":null,"aj":[null],"ajb":[null],"j_missing":true,"jb_missing":true}`,
		// json keeps the text as stored (whitespace included), jsonb normalizes it.
		3: `{"id":3,"j": null ,"jb":null,"aj":null,"ajb":null,"j_missing":false,"jb_missing":false}`,
		4: `{"id":4,"j":{"a": null},"jb":{"a": null},"aj":[],"ajb":[],"j_missing":false,"jb_missing":false}`,
	}
	for id, w := range want {
		if got[id][1] != w {
			t.Errorf("row %d:\n got %s\nwant %s", id, got[id][1], w)
		}
	}
	// The collapse itself: without the *_missing columns, rows 1 and 2 are the same bytes
	// after the id, and decode to the same Go values.
	cut := func(s string) string { return s[strings.Index(s, `"j"`):strings.Index(s, `,"j_missing"`)] }
	if cut(got[1][1]) != cut(got[2][1]) {
		t.Errorf("jsonb null and SQL NULL differ: %s vs %s", cut(got[1][1]), cut(got[2][1]))
	}
	type view struct {
		J   json.RawMessage   `json:"j"`
		JB  *json.RawMessage  `json:"jb"`
		AJ  []json.RawMessage `json:"aj"`
		AJB []any             `json:"ajb"`
	}
	var a, b view
	if err := json.Unmarshal([]byte(got[1][1]), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got[2][1]), &b); err != nil {
		t.Fatal(err)
	}
	if string(a.J) != string(b.J) || (a.JB == nil) != (b.JB == nil) || string(a.AJ[0]) != string(b.AJ[0]) || a.AJB[0] != b.AJB[0] {
		t.Errorf("decoded differently: %+v vs %+v", a, b)
	}
}
