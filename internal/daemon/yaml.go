package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadYAML reads the YAML file at path into v, a pointer to a config struct, as
// DecodeYAML does. Errors name the file.
func LoadYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := DecodeYAML(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// DecodeYAML decodes one YAML document into v, a pointer to a config struct:
//
//   - A field that v does not have is an error (line, field and type), as is any value that
//     does not fit its field.
//   - ${NAME} in a scalar value is replaced by the environment variable NAME. It is done
//     on the parsed document, so a value can hold any text (a secret with " #", quotes or a
//     newline is taken as is), comments are never expanded, and keys never are. A variable
//     set to the empty string gives an empty value; an unset one is an error naming the
//     variable, the line and the field (every unset variable is reported at once).
//   - $${ is a literal ${ (no expansion); any other ${ that is not ${NAME}, with NAME made
//     of letters, digits and _ and not starting with a digit, is an error.
//   - An unquoted value is typed after expansion as if its text were written in the file
//     (port: ${PORT} decodes into an int), except that it never becomes null: a variable
//     holding "null" or "~" gives that text. A quoted value ("${X}") is always a string.
//     An anchor's value is expanded once, where the anchor is defined.
func DecodeYAML(b []byte, v any) error { return decodeYAML(b, v, os.LookupEnv) }

func decodeYAML(b []byte, v any, lookup func(string) (string, bool)) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty YAML document")
		}
		return err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	x := expander{lookup: lookup}
	x.walk(&doc, "")
	errs := x.errs
	errs = append(errs, checkFields(&doc, reflect.TypeOf(v), map[*yaml.Node]bool{})...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return doc.Decode(v)
}

// expander replaces ${NAME} in the scalar values of a document.
type expander struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (x *expander) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			x.walk(c, path)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			x.walk(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if path != "" {
				k = path + "." + k
			}
			x.walk(n.Content[i+1], k)
		}
	case yaml.ScalarNode:
		x.scalar(n, path)
	case yaml.AliasNode:
		// expanded once, where its anchor is defined
	}
}

const quoted = yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle

func (x *expander) scalar(n *yaml.Node, path string) {
	if !strings.Contains(n.Value, "${") {
		return
	}
	if path == "" {
		path = "(document)"
	}
	where := fmt.Sprintf("line %d: %s", n.Line, path)
	v, unset, err := expand(n.Value, x.lookup)
	if err != nil {
		x.errs = append(x.errs, fmt.Errorf("%s: %w", where, err))
		return
	}
	for _, name := range unset {
		x.errs = append(x.errs, fmt.Errorf("%s: environment variable %s is not set", where, name))
	}
	if len(unset) > 0 {
		return
	}
	n.Value = v
	if n.Style&(quoted|yaml.TaggedStyle) == 0 {
		// plain: typed by its new text, as if written in the file; never null
		n.Tag = ""
		switch v {
		case "~", "null", "Null", "NULL":
			n.Tag = "!!str"
		}
	}
}

// expand replaces the ${NAME} references of s and returns the names that are not set.
func expand(s string, lookup func(string) (string, bool)) (string, []string, error) {
	var b strings.Builder
	var unset []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), unset, nil
		}
		if i > 0 && s[i-1] == '$' { // $${: a literal ${
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", nil, errors.New("${ without a closing } (write $${ for a literal ${)")
		}
		name := s[i+2 : i+2+end]
		if !validName(name) {
			return "", nil, fmt.Errorf("${%s}: not a variable name (write $${ for a literal ${)", name)
		}
		val, ok := lookup(name)
		if !ok {
			unset = append(unset, name)
		}
		b.WriteString(val)
		s = s[i+2+end+1:]
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkFields reports the mapping keys of n that t has no field for, with the message and
// field rules of yaml.v3's strict decoder (KnownFields), which Node.Decode does not apply.
// Values that do not fit their field are left to Decode, which reports them.
func checkFields(n *yaml.Node, t reflect.Type, seen map[*yaml.Node]bool) []error {
	switch n.Kind {
	case yaml.DocumentNode:
		var errs []error
		for _, c := range n.Content {
			errs = append(errs, checkFields(c, t, seen)...)
		}
		return errs
	case yaml.AliasNode:
		if n.Alias == nil || seen[n.Alias] {
			return nil // a recursive alias: Decode reports it
		}
		seen[n.Alias] = true
		defer delete(seen, n.Alias)
		return checkFields(n.Alias, t, seen)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decodes itself
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields, anyKey := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style&quoted == 0 { // merge key
				errs = append(errs, checkMerge(v, t, seen)...)
				continue
			}
			ft, ok := fields[k.Value]
			switch {
			case ok:
				errs = append(errs, checkFields(v, ft, seen)...)
			case !anyKey:
				errs = append(errs, fmt.Errorf("line %d: field %s not found in type %s", k.Line, k.Value, t))
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 1; i < len(n.Content); i += 2 {
			errs = append(errs, checkFields(n.Content[i], t.Elem(), seen)...)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for _, c := range n.Content {
			errs = append(errs, checkFields(c, t.Elem(), seen)...)
		}
	}
	return errs
}

// checkMerge checks the mappings merged into a struct by "<<": a mapping, an alias of one,
// or a sequence of those.
func checkMerge(v *yaml.Node, t reflect.Type, seen map[*yaml.Node]bool) []error {
	if v.Kind == yaml.SequenceNode {
		var errs []error
		for _, c := range v.Content {
			errs = append(errs, checkFields(c, t, seen)...)
		}
		return errs
	}
	return checkFields(v, t, seen)
}

// yamlFields maps the YAML keys of struct t to their types (yaml.v3's rules: the tag's name,
// else the lower-cased field name; "-" skipped; unexported fields skipped; ",inline" structs
// merged). anyKey is set when an inline map, or an inline struct that decodes itself, may
// take any other key.
func yamlFields(t reflect.Type) (fields map[string]reflect.Type, anyKey bool) {
	fields = map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.PkgPath != "" && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" && !strings.Contains(string(f.Tag), ":") {
			tag = string(f.Tag)
		}
		name, flags, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if inline(flags) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Map:
				anyKey = true
			case reflect.Struct:
				if reflect.PointerTo(ft).Implements(unmarshalerType) {
					anyKey = true // it decodes the whole mapping itself
					continue
				}
				sub, subAny := yamlFields(ft)
				for k, v := range sub {
					fields[k] = v
				}
				anyKey = anyKey || subAny
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, anyKey
}

func inline(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		if f == "inline" {
			return true
		}
	}
	return false
}

// Validator is a daemon's configuration: Validate fills its defaults and checks it.
type Validator interface{ Validate() error }

// Load reads the file at path into c (LoadYAML) and validates it. A read or decode error
// wraps errConfig, the daemon's sentinel; Validate's errors are returned as they are.
func Load(path string, c Validator, errConfig error) error {
	if err := LoadYAML(path, c); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return c.Validate()
}

// Parse is Load for YAML bytes (DecodeYAML).
func Parse(b []byte, c Validator, errConfig error) error {
	if err := DecodeYAML(b, c); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return c.Validate()
}
