// Package pgtree reads PostgreSQL's text form of its parse and query trees: what the
// server prints with nodeToString (outfuncs.c) and stores in pg_rewrite.ev_action for a
// view. It is the server's own analysis of a query — names resolved to OIDs, columns to
// attribute numbers, operators to their OIDs, views left as references to their own
// stored trees — so a caller can ask structural questions about a view's SQL (which
// table a column comes from, which columns a join equates) without parsing SQL.
//
// The format is PostgreSQL's, read generically: a node is {TYPE :field value …}; a list
// is (…), with a leading i, o, x or b for a list of integers, OIDs, transaction ids or a
// bitmapset; <> is NULL; a constant's datum is its length and its bytes in brackets.
// Field names are PostgreSQL's (varno, targetList…), so a reader takes the fields it
// knows and ignores the rest: the fields added by later server versions do not break it.
//
// Files: read.go (Read, the reader of the text form), node.go (Node and its accessors,
// Walk). Read parses a tree into Nodes; the accessors (Node.Int, Node.List, …) return zero
// values for missing or differently typed fields. Nothing here holds a goroutine.
package pgtree
