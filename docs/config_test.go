package docs

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/player"
)

// yamlKeys lists the keys a YAML file of type t can set, as dotted paths ("streams[].views[].sql"),
// by the structs' yaml tags: what the configuration reference must name. A type that decodes
// itself (yaml.Unmarshaler), a map and time.Duration are single values.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if opts == "inline" || f.Anonymous && name == "" {
			out = append(out, yamlKeys(ft, prefix)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := prefix + name
		elem, list := ft, ""
		for elem.Kind() == reflect.Slice || elem.Kind() == reflect.Pointer {
			if elem.Kind() == reflect.Slice {
				list += "[]"
			}
			elem = elem.Elem()
		}
		if elem.Kind() == reflect.Struct && !decodesItself(elem) && elem != reflect.TypeFor[time.Time]() {
			out = append(out, yamlKeys(elem, path+list+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

func decodesItself(t reflect.Type) bool {
	u := reflect.TypeFor[yaml.Unmarshaler]()
	return t.Implements(u) || reflect.PointerTo(t).Implements(u)
}

// goFields lists a Go-only config struct's exported fields ("Config.Addresses").
func goFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			out = append(out, t.Name()+"."+f.Name)
		}
	}
	return out
}

// TestConfigReference fails when a configuration key of the distributor or the player, or
// a field of cacheclient.Config, is not named in docs/operations.md's reference (as a code
// span: `streams[].views[].sql`), so that a new key cannot ship undocumented.
func TestConfigReference(t *testing.T) {
	b, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	check := func(section string, keys []string) {
		t.Helper()
		i := strings.Index(doc, section)
		if i < 0 {
			t.Fatalf("operations.md has no %q", section)
		}
		part := doc[i:]
		if j := strings.Index(part[len(section):], "\n### "); j >= 0 {
			part = part[:len(section)+j]
		}
		if len(keys) < 5 {
			t.Fatalf("%s: only %d keys found: the walk is broken", section, len(keys))
		}
		known := map[string]bool{}
		for _, k := range keys {
			known[k] = true
			if !strings.Contains(part, "`"+k+"`") {
				t.Errorf("%s does not document `%s`", section, k)
			}
		}
		// and the reverse: a row of the table names a key that exists (a removed or renamed
		// key cannot stay documented)
		for _, line := range strings.Split(part, "\n") {
			if k, ok := tableKey(line); ok && !known[k] {
				t.Errorf("%s documents `%s`, which is not a key", section, k)
			}
		}
	}
	check("### Distributor configuration reference", yamlKeys(reflect.TypeFor[distributor.Config](), ""))
	check("### Player configuration reference", yamlKeys(reflect.TypeFor[player.Config](), ""))
	check("### cacheclient.Config reference", goFields(reflect.TypeFor[cacheclient.Config]()))
}

// tableKey returns the key a reference table's row names in its first cell ("| `key` |").
func tableKey(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "| `")
	if !ok {
		return "", false
	}
	k, _, ok := strings.Cut(rest, "` |")
	return k, ok && !strings.Contains(k, "`")
}

func TestYAMLKeys(t *testing.T) {
	type inner struct {
		A string `yaml:"a"`
	}
	type cfg struct {
		X    int              `yaml:"x"`
		In   inner            `yaml:",inline"`
		L    []inner          `yaml:"l"`
		M    map[string]inner `yaml:"m"`
		D    time.Duration    `yaml:"d"`
		Skip int              `yaml:"-"`
	}
	got := strings.Join(yamlKeys(reflect.TypeFor[cfg](), ""), " ")
	if want := "x a l[].a m d"; got != want {
		t.Fatalf("yamlKeys = %q, want %q", got, want)
	}
}
