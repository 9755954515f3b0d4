package pgtree

import (
	"reflect"
	"testing"
)

// A view's stored rule as PostgreSQL 15 prints it (trimmed): nodes, typed lists, String
// lists, NULLs, a datum, escaped names.
const sample = `({QUERY :commandType 1 :hasAggs true :cteList <> :rtable ({RANGETBLENTRY :alias {ALIAS :aliasname e :colnames <>} :eref {ALIAS :aliasname e :colnames ("id" "na\ me")} :rtekind 0 :relid 17151 :relkind r :selectedCols (b 8 9)}) :jointree {FROMEXPR :fromlist ({RANGETBLREF :rtindex 1}) :quals {OPEXPR :opno 531 :args ({VAR :varno 1 :varattno 2 :location 241} {CONST :consttype 25 :constisnull false :constvalue 5 [ 20 0 0 0 120 ]}) :location 248}} :targetList ({TARGETENTRY :expr {VAR :varno 1 :varattno 1} :resno 1 :resname my\ id :resjunk false}) :aggargtypes (o 17160) :groupClause <> :limitCount <>})`

func TestRead(t *testing.T) {
	v, err := Read(sample)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := v.(List)
	if !ok || len(l) != 1 {
		t.Fatalf("got %T %v, want a list of one query", v, v)
	}
	q := l[0].(*Node)
	if !q.Is("QUERY") || q.Int("commandType") != 1 || !q.Bool("hasAggs") || q.List("cteList") != nil || q.Field("limitCount") != nil {
		t.Errorf("query fields: %+v", q.Fields)
	}
	rte := q.Nodes("rtable")[0]
	if rte.Int("relid") != 17151 || rte.Atom("relkind") != "r" || !reflect.DeepEqual(rte.Ints("selectedCols"), []int64{8, 9}) {
		t.Errorf("rte: %+v", rte.Fields)
	}
	if got := rte.Node("eref").Strings("colnames"); !reflect.DeepEqual(got, []string{"id", "na me"}) {
		t.Errorf("colnames %q", got)
	}
	op := q.Node("jointree").Node("quals")
	args := op.Nodes("args")
	if op.Int("opno") != 531 || len(args) != 2 || args[0].Int("varattno") != 2 {
		t.Errorf("quals: %+v", op.Fields)
	}
	if d, ok := args[1].Field("constvalue").(Datum); !ok || !reflect.DeepEqual([]byte(d), []byte{20, 0, 0, 0, 120}) {
		t.Errorf("datum %v", args[1].Field("constvalue"))
	}
	if tle := q.Nodes("targetList")[0]; tle.Atom("resname") != "my id" || tle.Node("expr").Int("varno") != 1 {
		t.Errorf("target: %+v", tle.Fields)
	}
	if got := q.Ints("aggargtypes"); !reflect.DeepEqual(got, []int64{17160}) {
		t.Errorf("oid list %v", got)
	}
	var vars int
	Walk(q, func(n *Node) bool {
		if n.Is("VAR") {
			vars++
		}
		return true
	})
	if vars != 2 {
		t.Errorf("Walk found %d VARs, want 2", vars)
	}
}

func TestReadErrors(t *testing.T) {
	for _, s := range []string{"", "{", "{QUERY :a", "(1 2", "{QUERY :a 3 [ 1 2", "{QUERY a}", "(i 1 x)", "{QUERY} extra", ")"} {
		if _, err := Read(s); err == nil {
			t.Errorf("Read(%q): no error", s)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sample)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Read(s) // must not panic or loop
	})
}
