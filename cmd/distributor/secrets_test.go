package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// TestSecretsNeverLogged runs the distributor command with secrets in its configuration —
// the PostgreSQL password in the DSN, a Kafka SASL password, an admin token — makes it
// fail in the usual ways (a server that does not answer, a role or a SASL password the
// server refuses, bad config files), and runs -check on it, and checks that no line it
// writes holds a secret: the start-up line with its config summary included.
func TestSecretsNeverLogged(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/distributor")
	dir := t.TempDir()
	const (
		pgPassword   = "pg-pw-SECRET-5d7f9b1c3e"
		saslPassword = "sasl-pw-SECRET-8a0c2e4f6b"
		adminToken   = "tok-admin-SECRET-3b5d7f9a1c"
	)
	adminTokens := filepath.Join(dir, "admin-tokens")
	if err := os.WriteFile(adminTokens, []byte("ops="+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEST_SASL_PASSWORD=" + saslPassword, "TEST_PG_PASSWORD=" + pgPassword}
	secrets := []string{pgPassword, saslPassword, adminToken, url.QueryEscape(pgPassword)}
	config := func(dsn, kafka string) string {
		return fmt.Sprintf(`postgres: {dsn: %q}
kafka: %s
http_addr: "127.0.0.1:0"
startup_timeout: 3s
admin: {addr: "127.0.0.1:0", tokens: {file: %q}}
streams:
  - topic: %s
    capture: poll
    views: [{name: v, sql: "SELECT 1 AS id", key: [id]}]
`, dsn, kafka, adminTokens, testenv.UniqueName("secrets"))
	}
	// run starts the command; a case that keeps running (a standby retrying PostgreSQL) is
	// stopped after a while and its log checked the same.
	run := func(name, cfg string, mustFail bool, flags ...string) string {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := testenv.StartCommand(t, bin, append([]string{"-config", path, "-debug"}, flags...), env...)
		wait := 5 * time.Second // a standby's retries: a few of them
		if mustFail {
			wait = time.Minute
		}
		exited, err := p.Wait(wait)
		if mustFail && (!exited || err == nil) {
			t.Errorf("%s: exited %v (%v), want a failure\n%s", name, exited, err, p.Output())
		}
		p.Stop()
		testenv.NoSecrets(t, name, p.Output(), secrets...)
		return p.Output()
	}
	badKafka := `{brokers: ["127.0.0.1:1"], timeout: 2s, sasl: {mechanism: PLAIN, user: dist, password: "${TEST_SASL_PASSWORD}"}}`
	goodPG := "postgres://nobody:${TEST_PG_PASSWORD}@127.0.0.1:1/db"

	out := run("unreachable broker", config(goodPG, badKafka), true)
	for _, want := range []string{`"msg":"distributor starting"`, `"user":"nobody"`, `"sasl_user":"dist"`, `"msg":"start-up: Kafka does not answer; retrying"`} {
		if !strings.Contains(out, want) {
			t.Errorf("unreachable broker: no %s in the log:\n%s", want, out)
		}
	}
	run("check", config(goodPG, badKafka), true, "-check")
	run("dsn that does not parse", config("postgres://nobody:${TEST_PG_PASSWORD}@127.0.0.1:notaport/db", badKafka), true)
	run("key=value dsn that does not parse", config("host=127.0.0.1 password=${TEST_PG_PASSWORD} port=notaport", badKafka), true)
	run("unknown field", config(goodPG, `{brokers: ["127.0.0.1:1"], sasl: {mechanism: PLAIN, user: dist, password: "${TEST_SASL_PASSWORD}", pasword: x}}`), true)
	run("bad mechanism", config(goodPG, `{brokers: ["127.0.0.1:1"], sasl: {mechanism: SCRAM, user: dist, password: "${TEST_SASL_PASSWORD}"}}`), true)

	if os.Getenv(testenv.EnvKafkaSASLBrokers) == "" && !testenv.InCI() {
		t.Log("no SASL_SSL listener: the cases with the real servers are skipped")
		return
	}
	sasl := testenv.KafkaSASL(t)
	kafka := func(password string) string {
		return fmt.Sprintf(`{brokers: [%q], timeout: 5s, tls: {enabled: true, ca_file: %q}, sasl: {mechanism: %s, user: %s, password: %q}}`,
			sasl.Brokers[0], sasl.TLS.CAFile, sasl.SASL.Mechanism, sasl.SASL.User, password)
	}
	secrets = append(secrets, sasl.SASL.Password)
	run("wrong SASL password", config(goodPG, kafka("${TEST_SASL_PASSWORD}")), true)

	// PostgreSQL refuses an unknown role: a refused login, the distributor stops at once.
	admin, err := url.Parse(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin.User = url.UserPassword("nobody_"+testenv.UniqueName("r"), pgPassword)
	if out := run("role refused", config(admin.String(), kafka(sasl.SASL.Password)), true); !strings.Contains(out, "does not exist") ||
		!strings.Contains(out, "PostgreSQL refused the login") {
		t.Errorf("no log of the refused role:\n%s", out)
	}
}
