package pgtree

import (
	"fmt"
	"strconv"
	"strings"
)

// Read parses one tree in PostgreSQL's text form: a node, a list of nodes (a view's
// ev_action is a list of its rule's queries) or NULL.
func Read(text string) (Value, error) {
	r := &reader{s: text}
	v, err := r.value()
	if err != nil {
		return nil, err
	}
	if tok := r.next(); tok != "" {
		return nil, r.errorf("unexpected %q after the tree", tok)
	}
	return v, nil
}

type reader struct {
	s   string
	pos int
}

func (r *reader) errorf(format string, a ...any) error {
	return fmt.Errorf("pgtree: at byte %d: %s", r.pos, fmt.Sprintf(format, a...))
}

// next returns the next token as pg_strtok cuts them: whitespace separates tokens; (, ),
// {, } are tokens of their own; a backslash makes the next byte part of the token. The
// token is returned raw (escapes kept); "" at the end.
func (r *reader) next() string {
	s := r.s
	for r.pos < len(s) && (s[r.pos] == ' ' || s[r.pos] == '\n' || s[r.pos] == '\t' || s[r.pos] == '\r') {
		r.pos++
	}
	if r.pos >= len(s) {
		return ""
	}
	start := r.pos
	switch s[r.pos] {
	case '(', ')', '{', '}':
		r.pos++
		return s[start:r.pos]
	}
	for r.pos < len(s) {
		c := s[r.pos]
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '(' || c == ')' || c == '{' || c == '}' {
			break
		}
		if c == '\\' && r.pos+1 < len(s) {
			r.pos++
		}
		r.pos++
	}
	return s[start:r.pos]
}

func (r *reader) peek() string {
	save := r.pos
	tok := r.next()
	r.pos = save
	return tok
}

// unescape drops the backslashes of a raw token.
func unescape(tok string) string {
	if !strings.Contains(tok, `\`) {
		return tok
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] == '\\' && i+1 < len(tok) {
			i++
		}
		b.WriteByte(tok[i])
	}
	return b.String()
}

func (r *reader) value() (Value, error) {
	tok := r.next()
	switch tok {
	case "":
		return nil, r.errorf("unexpected end")
	case "<>":
		return nil, nil
	case "{":
		return r.node()
	case "(":
		return r.list()
	case ")", "}":
		return nil, r.errorf("unexpected %q", tok)
	}
	if len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' {
		return Str(unescape(tok[1 : len(tok)-1])), nil
	}
	s := unescape(tok)
	// A datum: its length, then its bytes in brackets.
	if _, err := strconv.Atoi(s); err == nil && r.peek() == "[" {
		return r.datum()
	}
	return s, nil
}

func (r *reader) node() (*Node, error) {
	typ := r.next()
	if typ == "" || typ == "}" {
		return nil, r.errorf("node without a type")
	}
	n := &Node{Type: typ, Fields: map[string]Value{}}
	for {
		tok := r.next()
		switch {
		case tok == "}":
			return n, nil
		case tok == "":
			return nil, r.errorf("node %s not closed", typ)
		case tok[0] == ':':
			// A field whose value is missing (the next token is another field or the
			// end) is NULL; PostgreSQL prints none, but a reader should not fail on it.
			if p := r.peek(); p == "}" || (len(p) > 0 && p[0] == ':') {
				n.Fields[tok[1:]] = nil
				continue
			}
			v, err := r.value()
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", typ, tok[1:], err)
			}
			n.Fields[tok[1:]] = v
		default:
			return nil, r.errorf("node %s: %q where a field name was expected", typ, tok)
		}
	}
}

func (r *reader) list() (Value, error) {
	switch p := r.peek(); p {
	case "i", "o", "x", "b":
		r.next()
		l := IntList{Kind: p[0]}
		for {
			tok := r.next()
			if tok == ")" {
				return l, nil
			}
			v, err := strconv.ParseInt(tok, 10, 64)
			if err != nil {
				return nil, r.errorf("%s list: %q is not an integer", p, tok)
			}
			l.Vals = append(l.Vals, v)
		}
	}
	var l List
	for {
		if r.peek() == ")" {
			r.next()
			return l, nil
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
}

func (r *reader) datum() (Datum, error) {
	r.next() // [
	var d Datum
	for {
		tok := r.next()
		switch tok {
		case "]":
			return d, nil
		case "":
			return nil, r.errorf("datum not closed")
		}
		b, err := strconv.ParseInt(tok, 10, 16)
		if err != nil || b < -128 || b > 255 {
			return nil, r.errorf("datum byte %q", tok)
		}
		d = append(d, byte(b))
	}
}
