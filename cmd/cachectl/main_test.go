package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// sarama (TestTailConfig's producer) starts one process-wide metrics goroutine that never
// ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// TestExitStatus runs the binary: a bad command line exits 2, a failure 1, each error
// written once.
func TestExitStatus(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/cachectl")
	missing := filepath.Join(t.TempDir(), "none.yaml")
	plain := filepath.Join(t.TempDir(), "plain.yaml")
	if err := os.WriteFile(plain, []byte("kafka: {brokers: [\"127.0.0.1:1\"], timeout: 1s, sasl: {mechanism: PLAIN, user: u, password: pw-SECRET}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		once string
	}{
		{"no command", nil, 2, "usage: cachectl"},
		{"unknown command", []string{"frob"}, 2, `unknown command "frob"`},
		{"unknown flag", []string{"validate", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"validate", "extra"}, 2, `unexpected argument "extra"`},
		{"get without a view", []string{"get", "-stream", "s"}, 2, "get needs -stream and -view"},
		{"get -o yaml", []string{"get", "-stream", "s", "-view", "v", "-o", "yaml"}, 2, `-o "yaml"`},
		{"stats -o yaml", []string{"stats", "-o", "yaml"}, 2, `-o "yaml"`},
		{"tail without a topic", []string{"tail"}, 2, "tail needs -topic"},
		{"tail without brokers", []string{"tail", "-topic", "s"}, 2, "-config distributor.yaml (or player.yaml: its kafka section), -kafka-brokers host:port,… (or -brokers), or $STATECAST_KAFKA_BROKERS"},
		{"tail with -config and -brokers", []string{"tail", "-topic", "s", "-config", missing, "-brokers", "127.0.0.1:1"}, 2, "-config and -brokers both say"},
		{"tail -config of a missing file", []string{"tail", "-topic", "s", "-config", missing}, 1, "none.yaml"},
		{"tail warns of SASL PLAIN without TLS", []string{"tail", "-topic", "s", "-config", plain}, 1, "warning: kafka.sasl.mechanism: PLAIN without kafka.tls.enabled"},
		{"validate a missing file", []string{"validate", "-config", missing}, 1, "none.yaml"},
		{"stats of nothing", []string{"stats", "-player", "127.0.0.1:1"}, 1, "connection refused"},
		{"version", []string{"version"}, 0, "cachectl "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := testenv.RunCommand(t, bin, tc.args, "STATECAST_KAFKA_BROKERS=") // the flags alone
			if code != tc.code || strings.Count(out, tc.once) != 1 {
				t.Errorf("exit %d, want %d; %q %d times, want once:\n%s", code, tc.code, tc.once, strings.Count(out, tc.once), out)
			}
		})
	}
}

// TestValidateConnect runs validate -connect against the real PostgreSQL: a good wal
// view is described (columns, key, replica identity, publication, slot; exit 0); a view
// whose key is not in its result and one over a table without a key fail (exit 1) and say
// why.
func TestValidateConnect(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE TABLE items (id int PRIMARY KEY, name text, updated_at timestamptz NOT NULL DEFAULT now())",
		"CREATE TABLE logs (at timestamptz, line text)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.Close(ctx)
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/cachectl")
	dir := t.TempDir()
	write := func(name, streams string) string {
		path := filepath.Join(dir, name+".yaml")
		body := fmt.Sprintf("postgres: {dsn: %q}\nkafka: {brokers: [\"127.0.0.1:1\"]}\nstreams:\n%s", dsn, streams)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	topic := testenv.UniqueName("validate")
	good := write("good", fmt.Sprintf(`  - topic: %s
    views: [{name: items, sql: "SELECT id, name FROM items", key: [id]}]
  - topic: %s-poll
    capture: poll
    views: [{name: items_polled, sql: "SELECT id, name, updated_at FROM items", key: [id], incremental: updated_at}]
`, topic, topic))
	out, code := testenv.RunCommand(t, bin, []string{"validate", "-connect", "-config", good})
	for _, want := range []string{
		"wal_level logical",
		"view items: ok", "columns: id integer (key), name text",
		"items: replica identity default (id)",
		"does not exist: the distributor creates it",
		"view items_polled: ok", "updated_at timestamp with time zone (incremental)",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("validate -connect of a good config: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a FAIL line for a good config:\n%s", out)
	}

	bad := write("bad", fmt.Sprintf(`  - topic: %s
    views:
      - {name: wrong_key, sql: "SELECT id, name FROM items", key: [item_id]}
      - {name: keyless, sql: "SELECT at, line FROM logs", key: [at]}
      - {name: no_table, sql: "SELECT id FROM nowhere", key: [id]}
`, topic))
	out, code = testenv.RunCommand(t, bin, []string{"validate", "-connect", "-config", bad})
	for _, want := range []string{"view wrong_key: FAIL", "item_id", "view keyless: FAIL", "no primary key", "view no_table: FAIL", `"nowhere" does not exist`} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("validate -connect of a bad config: exit %d, want 1 and %q:\n%s", code, want, out)
		}
	}
	// Without -connect, the file alone is valid.
	if out, code := testenv.RunCommand(t, bin, []string{"validate", "-config", bad}); code != 0 {
		t.Errorf("validate without -connect: exit %d\n%s", code, out)
	}
}

// TestNoDemoLinked: the operator's tool links neither the in-process demo broker nor the
// demo; `cachectl dev` runs the cachectl-dev command found beside it, with its arguments
// and its exit status, and names what to do when there is none.
func TestNoDemoLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/statecast/statecast/cmd/cachectl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "franz-go") || strings.HasSuffix(pkg, "/cmd/internal/devenv") || strings.HasSuffix(pkg, "/examples/sportsbook") {
			t.Errorf("cachectl links %s", pkg)
		}
	}

	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/cachectl")
	if out, code := testenv.RunCommand(t, bin, []string{"dev"}, "PATH="+t.TempDir()); code != 1 || !strings.Contains(out, "go run ./cmd/cachectl-dev") {
		t.Errorf("dev without cachectl-dev: exit %d, want 1 and what to do:\n%s", code, out)
	}
	dev := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/cachectl-dev")
	if err := os.Rename(dev, filepath.Join(filepath.Dir(bin), "cachectl-dev")); err != nil {
		t.Fatal(err)
	}
	if out, code := testenv.RunCommand(t, bin, []string{"dev", "-pg", "", "extra"}, "STATECAST_PG_DSN="); code != 2 || !strings.Contains(out, `unexpected argument "extra"`) {
		t.Errorf("dev with a stray argument: exit %d, want cachectl-dev's 2:\n%s", code, out)
	}
}

// TestTailConfig runs tail as the README shows it, beside the daemons: Kafka from the kafka
// section of a config file (here a player's, its brokers from a variable), with no
// $STATECAST_KAFKA_BROKERS and none of the file's other variables set.
func TestTailConfig(t *testing.T) {
	bin := testenv.BuildCommand(t, "github.com/statecast/statecast/cmd/cachectl")
	b, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prod, err := sarama.NewSyncProducer(b.ListenAddrs(), kafkaconn.ProducerConfig("cachectl-test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := prod.SendMessage(recordsarama.ProducerMessage("s", record.EncodeKey("v", "1"), []byte(`{"id":1}`),
		record.Meta{View: "v", Kind: record.KindRow, Epoch: 1})); err != nil {
		t.Fatal(err)
	}
	_ = prod.Close()
	cfg := filepath.Join(t.TempDir(), "player.yaml")
	if err := os.WriteFile(cfg, []byte("kafka:\n  brokers:\n    - ${TEST_BROKERS}\n  client_id: ${TEST_UNUSED_ID}\nstreams:\n  - name: s\n    topic: ${NOT_SET_ANYWHERE}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := testenv.RunCommand(t, bin, []string{"tail", "-config", cfg, "-topic", "s"},
		"STATECAST_KAFKA_BROKERS=", "TEST_BROKERS="+strings.Join(b.ListenAddrs(), ","), "TEST_UNUSED_ID=player-1")
	if code != 0 || !strings.Contains(out, `v|1  {"id":1}`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
