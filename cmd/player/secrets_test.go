package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// keyLines are the base64 lines of a PEM key file: secrets, each of them.
func keyLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// TestSecretsNeverLogged runs the player command with secrets in its configuration — a
// Kafka SASL password, client tokens in a file and in a variable, an admin token, a TLS
// key — makes it fail in the usual ways (a broker unreachable for startup_timeout, a wrong
// SASL password, which is refused without retrying, bad config files), and has clients
// present good and wrong tokens to a running one: no line it writes holds a secret.
func TestSecretsNeverLogged(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/player")
	pki := testenv.NewPKI(t)
	dir := t.TempDir()
	const (
		saslPassword = "sasl-pw-SECRET-7f3a9c1e5b"
		fileToken    = "tok-file-SECRET-2c8e4a6f0d"
		envToken     = "tok-env-SECRET-9b1d3f5a7c"
		adminToken   = "tok-admin-SECRET-4e6a8c0b2d"
		wrongToken   = "tok-wrong-SECRET-1a3c5e7f9b"
	)
	tokens := filepath.Join(dir, "tokens")
	adminTokens := filepath.Join(dir, "admin-tokens")
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokens, "pricing="+fileToken+"\n")
	write(adminTokens, "ops="+adminToken+"\n")
	env := []string{"TEST_SASL_PASSWORD=" + saslPassword, "TEST_PLAYER_TOKENS=risk=" + envToken}
	secrets := append([]string{saslPassword, fileToken, envToken, adminToken, wrongToken}, keyLines(t, pki.ServerKey)...)

	// config is a player's file; topic "" is one that does not exist.
	config := func(kafka string, topic string) string {
		if topic == "" {
			topic = testenv.UniqueName("absent")
		}
		return fmt.Sprintf(`listen: "127.0.0.1:0"
http_addr: "127.0.0.1:0"
admin: {addr: "127.0.0.1:0", tokens: {file: %q}}
tls: {cert_file: %q, key_file: %q}
tokens: {file: %q, env: TEST_PLAYER_TOKENS}
kafka: %s
startup_timeout: 3s
streams: [{name: s, topic: %s, views: ["*"]}]
`, adminTokens, pki.ServerCert, pki.ServerKey, tokens, kafka, topic)
	}
	runFail := func(name, cfg string, flags ...string) string {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		write(path, cfg)
		p := testenv.StartCommand(t, bin, append([]string{"-config", path, "-debug"}, flags...), env...)
		if exited, err := p.Wait(90 * time.Second); !exited || err == nil {
			t.Errorf("%s: exited %v (%v), want a failure\n%s", name, exited, err, p.Output())
		}
		testenv.NoSecrets(t, name, p.Output(), secrets...)
		return p.Output()
	}

	out := runFail("unreachable broker", config(`{brokers: ["127.0.0.1:1"], timeout: 2s, sasl: {mechanism: PLAIN, user: player, password: "${TEST_SASL_PASSWORD}"}}`, ""))
	for _, want := range []string{`"msg":"player starting"`, `"sasl_user":"player"`, `"tokens_file":"` + tokens + `"`,
		`"msg":"start-up: Kafka does not answer; retrying"`, `player: Kafka unreachable: brokers 127.0.0.1:1 did not answer within startup_timeout (3s)`} {
		if !strings.Contains(out, want) {
			t.Errorf("unreachable broker: no %s in the log:\n%s", want, out)
		}
	}
	out = runFail("check", config(`{brokers: ["127.0.0.1:1"], timeout: 2s, sasl: {mechanism: PLAIN, user: player, password: "${TEST_SASL_PASSWORD}"}}`, ""), "-check")
	for _, want := range []string{"ok    tls: ", "ok    tokens: 2 client token(s)", "FAIL  kafka: 127.0.0.1:1"} {
		if !strings.Contains(out, want) {
			t.Errorf("check: no %q in its output:\n%s", want, out)
		}
	}
	runFail("unknown field", config(`{brokers: ["127.0.0.1:1"], sasl: {mechanism: PLAIN, user: player, password: "${TEST_SASL_PASSWORD}", passwort: "${TEST_SASL_PASSWORD}"}}`, ""))
	runFail("bad mechanism", config(`{brokers: ["127.0.0.1:1"], sasl: {mechanism: plain, user: player, password: "${TEST_SASL_PASSWORD}"}}`, ""))
	runFail("public admin without tokens", strings.Replace(config(`{brokers: ["127.0.0.1:1"], sasl: {mechanism: PLAIN, user: player, password: "${TEST_SASL_PASSWORD}"}}`, ""),
		`admin: {addr: "127.0.0.1:0", tokens: {file: "`+adminTokens+`"}}`, `admin: {addr: ":0"}`, 1))
	write(filepath.Join(dir, "bad-tokens"), "pricing "+fileToken+"\n")
	runFail("malformed tokens file", strings.Replace(config(`{brokers: ["127.0.0.1:1"]}`, ""), tokens, filepath.Join(dir, "bad-tokens"), 1))
	write(filepath.Join(dir, "dup-tokens"), "pricing="+fileToken+"\nrisk="+fileToken+"\n")
	runFail("one token twice", strings.Replace(config(`{brokers: ["127.0.0.1:1"]}`, ""), tokens, filepath.Join(dir, "dup-tokens"), 1))

	if os.Getenv(testenv.EnvKafkaSASLBrokers) == "" && !testenv.InCI() {
		t.Log("no SASL_SSL listener: the wrong-password and running cases are skipped")
		return
	}
	sasl := testenv.KafkaSASL(t)
	kafka := func(password string) string {
		return fmt.Sprintf(`{brokers: [%q], timeout: 5s, tls: {enabled: true, ca_file: %q}, sasl: {mechanism: %s, user: %s, password: %q}}`,
			sasl.Brokers[0], sasl.TLS.CAFile, sasl.SASL.Mechanism, sasl.SASL.User, password)
	}
	secrets = append(secrets, sasl.SASL.Password)
	// A refusal is not retried for startup_timeout: it fails at once.
	if out := runFail("wrong SASL password", config(kafka("${TEST_SASL_PASSWORD}"), "")); !strings.Contains(out, "a refusal: not retried") ||
		strings.Contains(out, "start-up: Kafka does not answer; retrying") {
		t.Errorf("wrong SASL password: not refused at once:\n%s", out)
	}

	// A running player: clients with a good token, a wrong one, none.
	topic := testenv.NewTopic(t, "secrets", map[string]string{"cleanup.policy": "compact"})
	path := filepath.Join(dir, "running.yaml")
	write(path, config(kafka(sasl.SASL.Password), topic))
	p := testenv.StartCommand(t, bin, []string{"-config", path, "-debug"}, env...)
	if !p.WaitOutput(`"msg":"stream ready"`, 90*time.Second) || !p.WaitOutput(`"msg":"player listening"`, time.Second) {
		t.Fatalf("the player did not start:\n%s", p.Output())
	}
	addr := listening(t, p.Output(), "grpc")
	for _, tok := range []string{fileToken, envToken, wrongToken, ""} {
		tc := &tls.Config{RootCAs: pki.Pool}
		opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
		if tok != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(tok)))
		}
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
		if err == nil {
			_ = st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{ClientId: "c", Stream: "s", Views: []string{"v"}}}})
			_, err = st.Recv()
		}
		t.Logf("token %.8s…: %v", tok, err)
		if tok == fileToken && err == nil {
			defer func() { cancel(); _ = conn.Close() }() // connected while the status pages are read
			continue
		}
		cancel()
		_ = conn.Close()
	}
	// The status pages (admin endpoint) show principals, never a secret.
	for _, tok := range []string{adminToken, ""} {
		req, _ := http.NewRequest("GET", "http://"+listening(t, p.Output(), "admin")+"/status.json", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if (tok != "") != (resp.StatusCode == http.StatusOK) || (tok != "" && !strings.Contains(string(body), `"principal": "pricing"`)) {
			t.Errorf("status (admin token sent: %v): %d %s", tok != "", resp.StatusCode, body)
		}
		testenv.NoSecrets(t, "status page", string(body), secrets...)
	}
	p.Stop()
	testenv.NoSecrets(t, "running", p.Output(), secrets...)
	if !strings.Contains(p.Output(), "target admitted") {
		t.Errorf("no client was admitted:\n%s", p.Output())
	}
}

// listening returns the address named key ("grpc", "admin") of the "player listening" line.
func listening(t *testing.T, out, key string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"msg":"player listening"`) {
			i := strings.Index(l, `"`+key+`":"`)
			if i >= 0 {
				rest := l[i+len(key)+4:]
				return rest[:strings.Index(rest, `"`)]
			}
		}
	}
	t.Fatalf("no %s address in:\n%s", key, out)
	return ""
}
