package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type conn struct {
	Brokers []string      `yaml:"brokers"`
	Timeout time.Duration `yaml:"timeout"`
	SASL    struct {
		User     string `yaml:"user"`
		Password string `yaml:"password"`
	} `yaml:"sasl"`
}

type kafkaBlock struct {
	conn  `yaml:",inline"`
	Level int `yaml:"level"`
}

type upper string

func (u *upper) UnmarshalYAML(n *yaml.Node) error { *u = upper(strings.ToUpper(n.Value)); return nil }

type view struct {
	Name    string `yaml:"name"`
	Enabled bool   `yaml:"enabled"`
	Mode    upper  `yaml:"mode"`
}

type testConfig struct {
	DSN     string            `yaml:"dsn"`
	Port    int               `yaml:"port"`
	Kafka   kafkaBlock        `yaml:"kafka"`
	Views   []view            `yaml:"views"`
	Extra   map[string]string `yaml:"extra"`
	Secrets []string          `yaml:"secrets"`
	Any     map[string]any    `yaml:"any"`
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func decode(t *testing.T, doc string, vars map[string]string) (testConfig, error) {
	t.Helper()
	var c testConfig
	err := decodeYAML([]byte(doc), &c, env(vars))
	return c, err
}

// TestSecretsAsIs: a value from the environment is taken whole: " #" (a YAML comment in
// text), quotes, a colon, a newline, ${...} inside it, YAML's null words and leading zeros.
func TestSecretsAsIs(t *testing.T) {
	for _, secret := range []string{"pa ss #word", `a"b'c: d`, "line1\nline2", "s3cr:t ${x}", "null", "~", "0123", "true", "- x", "{a: b}"} {
		c, err := decode(t, `
dsn: postgres://u:${PW}@h/db   # the password is a secret
kafka:
  sasl:
    user: u
    password: ${PW}
secrets:
  - "${PW}"
  - ${PW}
`, map[string]string{"PW": secret})
		if err != nil {
			t.Fatalf("%q: %v", secret, err)
		}
		if c.DSN != "postgres://u:"+secret+"@h/db" || c.Kafka.SASL.Password != secret || !reflect.DeepEqual(c.Secrets, []string{secret, secret}) {
			t.Errorf("%q: dsn %q, password %q, secrets %q", secret, c.DSN, c.Kafka.SASL.Password, c.Secrets)
		}
	}
}

// TestCommentsNotExpanded: ${X} in a comment is not a reference, set or not.
func TestCommentsNotExpanded(t *testing.T) {
	c, err := decode(t, `
# dsn: ${UNSET_IN_COMMENT}
dsn: plain # ${ALSO_UNSET} and ${not a name
`, nil)
	if err != nil || c.DSN != "plain" {
		t.Fatalf("dsn %q, err %v", c.DSN, err)
	}
}

// TestUnsetVariable: every unset variable is reported with its line and field.
func TestUnsetVariable(t *testing.T) {
	_, err := decode(t, `
dsn: ${PG_DSN}
kafka:
  sasl:
    password: "${KAFKA_PW}"
views:
  - name: a
  - name: ${VIEW}-${SET}
`, map[string]string{"SET": "x"})
	for _, want := range []string{
		"line 2: dsn: environment variable PG_DSN is not set",
		"line 5: kafka.sasl.password: environment variable KAFKA_PW is not set",
		"line 8: views[1].name: environment variable VIEW is not set",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "SET ") {
		t.Errorf("a set variable reported: %v", err)
	}
	// set to the empty string: an empty value, no error
	c, err := decode(t, "dsn: ${EMPTY}\nport: ${EMPTY}\n", map[string]string{"EMPTY": ""})
	if err != nil || c.DSN != "" || c.Port != 0 {
		t.Errorf("empty variable: %+v, %v", c, err)
	}
}

// TestUnknownField: a key the config has no field for is an error with its line, at any
// depth, in an inline struct too; map keys are free.
func TestUnknownField(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"dns: x\n", "line 1: field dns not found in type daemon.testConfig"},
		{"kafka:\n  brokers: [b]\n  bokers: [b]\n", "line 3: field bokers not found in type daemon.kafkaBlock"},
		{"kafka:\n  sasl: {user: u, pasword: p}\n", "line 2: field pasword not found in type struct"},
		{"views:\n  - name: a\n  - name: b\n    colour: red\n", "line 4: field colour not found in type daemon.view"},
		{"base: &b {name: a, colour: red}\nviews: [*b]\n", "field base not found"},
		{"views:\n  - <<: {name: a, colour: red}\n", "field colour not found in type daemon.view"},
	} {
		_, err := decode(t, tc.doc, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.want)
		}
	}
	c, err := decode(t, "extra: {any.key: v, '${NOT_EXPANDED}': w}\nany: {x: {y: 1}}\nkafka: {level: 2, timeout: 1s}\nviews: [{mode: abc}]\n", nil)
	if err != nil || c.Extra["any.key"] != "v" || c.Extra["${NOT_EXPANDED}"] != "w" || c.Kafka.Level != 2 ||
		c.Kafka.Timeout != time.Second || c.Views[0].Mode != "ABC" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// TestTyping: an unquoted reference is typed by its value; a quoted one stays a string;
// a type mismatch is reported with the line, as for a literal.
func TestTyping(t *testing.T) {
	vars := map[string]string{"PORT": "7070", "ON": "true", "T": "250ms", "MODE": "rewrite"}
	c, err := decode(t, "port: ${PORT}\nkafka:\n  timeout: ${T}\nviews:\n  - name: v\n    enabled: ${ON}\n    mode: ${MODE}\n", vars)
	if err != nil || c.Port != 7070 || c.Kafka.Timeout != 250*time.Millisecond || !c.Views[0].Enabled || c.Views[0].Mode != "REWRITE" {
		t.Fatalf("%+v, %v", c, err)
	}
	for _, tc := range []struct{ doc, want string }{
		{"port: \"${PORT}\"\n", "line 1: cannot unmarshal !!str `7070` into int"},
		{"\nport: ${T}\n", "line 2: cannot unmarshal !!str `250ms` into int"},
		{"port: [\"${PORT}\"]\n", "line 1: cannot unmarshal !!seq into int"},
	} {
		if _, err := decode(t, tc.doc, vars); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestEscape: $${ is a literal ${; a ${ that is not a reference is an error; an anchor is
// expanded once (an escaped value stays escaped through its aliases).
func TestEscape(t *testing.T) {
	c, err := decode(t, `
dsn: "$${NOT_A_VAR} $$ $x $${ ${A}"
secrets:
  - &s "$${B}"
  - *s
  - $$${A}
`, map[string]string{"A": "a", "B": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DSN != "${NOT_A_VAR} $$ $x ${ a" || !reflect.DeepEqual(c.Secrets, []string{"${B}", "${B}", "$${A}"}) {
		t.Errorf("dsn %q, secrets %q", c.DSN, c.Secrets)
	}
	for _, tc := range []struct{ doc, want string }{
		{"dsn: ${1X}\n", "line 1: dsn: ${1X}: not a variable name"},
		{"dsn: ${A-default}\n", "${A-default}: not a variable name"},
		{"dsn: x${A\n", "line 1: dsn: ${ without a closing }"},
	} {
		if _, err := decode(t, tc.doc, map[string]string{"A": "a"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestDocuments(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "dsn: a\n---\ndsn: b\n", "dsn: [\n"} {
		if _, err := decode(t, doc, nil); err == nil {
			t.Errorf("%q accepted", doc)
		}
	}
}

func TestLoadYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("dsn: ${DAEMON_TEST_DSN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DAEMON_TEST_DSN", "postgres://x # y")
	var c testConfig
	if err := LoadYAML(path, &c); err != nil || c.DSN != "postgres://x # y" {
		t.Fatalf("%+v, %v", c, err)
	}
	if err := LoadYAML(filepath.Join(t.TempDir(), "missing.yaml"), &c); err == nil {
		t.Fatal("missing file accepted")
	}
	if err := os.WriteFile(path, []byte("dsn: ${DAEMON_TEST_UNSET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := LoadYAML(path, &c); err == nil || !strings.HasPrefix(err.Error(), path+": line 1: dsn: environment variable DAEMON_TEST_UNSET is not set") {
		t.Fatalf("err = %v", err)
	}
}
