package pgtree

import "strconv"

// Node is one node of a tree: its type as PostgreSQL prints it (QUERY, RANGETBLENTRY,
// VAR, OPEXPR…) and its fields by name.
type Node struct {
	Type   string
	Fields map[string]Value
}

// Value is a field's or a list element's value: *Node, List, IntList (also OID, xid and
// bitmapset lists), Datum, an atom (string: a number, a name, true or false), or nil for
// PostgreSQL's NULL (<>), which also stands for an empty list.
type Value any

// List is a list of nodes or values.
type List []Value

// IntList is an integer, OID, xid or bitmapset list; Kind is its letter (i, o, x, b).
type IntList struct {
	Kind byte
	Vals []int64
}

// Datum is a constant's value: PostgreSQL's in-memory bytes of it (for a by-value type,
// the machine word; for a varlena, its header and bytes).
type Datum []byte

// Str is a string value of a list element: PostgreSQL prints String nodes quoted ("id").
type Str string

// Field returns a field's value (nil when absent).
func (n *Node) Field(name string) Value {
	if n == nil {
		return nil
	}
	return n.Fields[name]
}

// Node returns a field that is a node, or nil.
func (n *Node) Node(name string) *Node {
	v, _ := n.Field(name).(*Node)
	return v
}

// List returns a field that is a list of nodes or values (nil for NULL or another type).
func (n *Node) List(name string) List {
	v, _ := n.Field(name).(List)
	return v
}

// Nodes returns the nodes of a list field, skipping elements that are not nodes.
func (n *Node) Nodes(name string) []*Node {
	var out []*Node
	for _, v := range n.List(name) {
		if c, ok := v.(*Node); ok {
			out = append(out, c)
		}
	}
	return out
}

// Ints returns a field that is an integer list (i, o, x or b), or nil.
func (n *Node) Ints(name string) []int64 {
	if v, ok := n.Field(name).(IntList); ok {
		return v.Vals
	}
	return nil
}

// Atom returns a field that is an atom, or "".
func (n *Node) Atom(name string) string {
	v, _ := n.Field(name).(string)
	return v
}

// Int returns a field that is an integer atom, or 0.
func (n *Node) Int(name string) int64 {
	i, _ := strconv.ParseInt(n.Atom(name), 10, 64)
	return i
}

// Bool returns a field that is the atom true.
func (n *Node) Bool(name string) bool { return n.Atom(name) == "true" }

// Is reports whether n is a node of type t.
func (n *Node) Is(t string) bool { return n != nil && n.Type == t }

// Strings returns a list field's String elements ("id" → id).
func (n *Node) Strings(name string) []string {
	var out []string
	for _, v := range n.List(name) {
		if s, ok := v.(Str); ok {
			out = append(out, string(s))
		}
	}
	return out
}

// Walk calls fn for v and, while fn returns true, for every node below it, depth first.
func Walk(v Value, fn func(*Node) bool) {
	switch x := v.(type) {
	case *Node:
		if x == nil || !fn(x) {
			return
		}
		for _, f := range x.Fields {
			Walk(f, fn)
		}
	case List:
		for _, e := range x {
			Walk(e, fn)
		}
	}
}
