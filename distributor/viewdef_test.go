package distributor

import (
	"strings"
	"testing"
)

// TestViewDef: the definition is versioned, stable for equal inputs, and changes with the
// analyzed query, the key, the tables and depends a view names.
func TestViewDef(t *testing.T) {
	base := func() *viewState {
		return &viewState{cfg: &ViewConfig{Name: "v", SQL: "SELECT id FROM t", Key: []string{"id"}}, query: "SELECT t.id FROM t"}
	}
	a := viewDef(base(), nil)
	if !strings.HasPrefix(a, "v1:") || len(a) != len("v1:")+16 {
		t.Fatalf("viewDef = %q, want v1: and 16 hex digits", a)
	}
	if b := viewDef(base(), nil); b != a {
		t.Fatalf("viewDef not stable: %q, %q", a, b)
	}
	for name, change := range map[string]func(*viewState){
		"query":   func(st *viewState) { st.query = "SELECT t.id FROM t WHERE true" },
		"text":    func(st *viewState) { st.query = "" },
		"key":     func(st *viewState) { st.cfg.Key = []string{"id", "x"} },
		"tables":  func(st *viewState) { st.cfg.Tables = []string{"u"} },
		"depends": func(st *viewState) { st.cfg.Depends = map[string][]string{"u": {"id"}} },
	} {
		st := base()
		change(st)
		if b := viewDef(st, nil); b == a {
			t.Errorf("%s changed, the same definition %s", name, b)
		}
	}
	// The SQL text is not part of an analyzed view's definition: its layout may change.
	st := base()
	st.cfg.SQL = "SELECT  id  FROM  t"
	if b := viewDef(st, nil); b != a {
		t.Errorf("only the text's layout changed, the definition did: %s, %s", a, b)
	}
}
