package testenv

import (
	"reflect"
	"testing"
)

// SameFields fails t unless struct types a and b have the same fields in the same order:
// names, tags and kinds, nested structs compared the same way. A public config type that
// mirrors an internal one (player.AdminConfig and daemon.Admin) is checked with it, so a
// field added to one cannot be forgotten in the other (a Go conversion ignores tags, and a
// field-by-field copy ignores a new field).
func SameFields(t testing.TB, a, b reflect.Type) {
	t.Helper()
	if a.Kind() != reflect.Struct || b.Kind() != reflect.Struct {
		t.Fatalf("%v and %v: want two struct types", a, b)
	}
	if a.NumField() != b.NumField() {
		t.Fatalf("%v has %d fields, %v %d", a, a.NumField(), b, b.NumField())
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Tag != fb.Tag || fa.Type.Kind() != fb.Type.Kind() {
			t.Fatalf("%v.%s %v `%s` differs from %v.%s %v `%s`", a, fa.Name, fa.Type, fa.Tag, b, fb.Name, fb.Type, fb.Tag)
		}
		if fa.Type.Kind() == reflect.Struct {
			SameFields(t, fa.Type, fb.Type)
		}
	}
}
