package distributor

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

const goodYAML = `
postgres:
  dsn: ${TEST_DIST_DSN}
kafka:
  brokers: [localhost:9092]
http_addr: 127.0.0.1:0
streams:
  - topic: cache.shop
    capture: poll
    delete_retention: 48h
    topic_configs: {min.cleanable.dirty.ratio: "0.1"}
    views:
      - name: items
        sql: SELECT id, name, updated_at FROM items;
        key: [id]
        incremental: updated_at
        poll_interval: 250ms
        overlap: 5s
        listen: items_changed
        refresh_cron: "*/5 * * * *"
      - name: orders
        sql: SELECT customer_id, sku, version FROM orders
        key: [customer_id, sku]
        incremental: version
        overlap: 100
        refresh_mode: rewrite
`

func TestParseConfig(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u@h/db")
	c, err := ParseConfig([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Streams[0]
	if c.Postgres.DSN != "postgres://u@h/db" || c.Kafka.ClientID != DefaultClientID {
		t.Errorf("defaults/env: %+v", c)
	}
	if s.DeleteRetention != 48*time.Hour || s.Segment != DefaultSegment || s.ReplicationFactor != 1 {
		t.Errorf("stream: %+v", s)
	}
	items, orders := s.Views[0], s.Views[1]
	if items.SQL != "SELECT id, name, updated_at FROM items" || items.Overlap.Duration != 5*time.Second ||
		items.RefreshMode != ModeReconcile || items.PollInterval != 250*time.Millisecond {
		t.Errorf("items: %+v", items)
	}
	if !orders.Overlap.IsCount || orders.Overlap.Versions != 100 || orders.PollInterval != DefaultPollInterval ||
		orders.RefreshMode != ModeRewrite || len(orders.Key) != 2 {
		t.Errorf("orders: %+v", orders)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u@h/db")
	edit := func(old, new string) string {
		if !strings.Contains(goodYAML, old) {
			t.Fatalf("test bug: %q not in config", old)
		}
		return strings.Replace(goodYAML, old, new, 1)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"invalid yaml", "streams: [", "yaml"},
		{"unknown field", edit("poll_interval: 250ms", "poll_interval: 250ms\n        pol_interval: 1s"), "pol_interval"},
		{"unknown top field", goodYAML + "extra: 1\n", "extra"},
		{"bad cron", edit(`"*/5 * * * *"`, `"61 * * * *"`), `view "items".refresh_cron`},
		{"bad mode", edit("refresh_mode: rewrite", "refresh_mode: replace"), `view "orders".refresh_mode`},
		{"bad overlap", edit("overlap: 5s", "overlap: soon"), "overlap"},
		{"bad duration", edit("poll_interval: 250ms", "poll_interval: fast"), "line 17: cannot unmarshal !!str `fast` into time.Duration"},
		{"unset env", edit("${TEST_DIST_DSN}", "${TEST_DIST_UNSET_VAR}"), "TEST_DIST_UNSET_VAR"},
		{"bad view name", edit("name: items", "name: 'it ems'"), "views[0].name"},
		{"ctl view name", edit("name: items", "name: '!ctl'"), "views[0].name"},
		{"duplicate view", edit("name: orders", "name: items"), `view "items": name already used`},
		{"no key", edit("key: [id]", "key: []"), `view "items".key`},
		{"repeated key", edit("key: [id]", "key: [id, id]"), `view "items".key`},
		{"no sql", edit("sql: SELECT id, name, updated_at FROM items;", "sql: ' ;'"), `view "items".sql`},
		{"listen without incremental", edit("incremental: version", "listen: x"), `view "orders": overlap and listen`},
		{"bad compression", edit("brokers: [localhost:9092]", "brokers: [localhost:9092]\n  compression: brotli"), "kafka.compression"},
		{"no brokers", edit("brokers: [localhost:9092]", "brokers: []"), "kafka.brokers"},
		{"bad topic", edit("topic: cache.shop", "topic: 'a b'"), "streams[0].topic"},
		{"fixed topic config", edit(`min.cleanable.dirty.ratio: "0.1"`, `cleanup.policy: delete`), "cleanup.policy"},
		{"short transaction timeout", edit("brokers: [localhost:9092]", "brokers: [localhost:9092]\n  transaction_timeout: 10ms"), "kafka.transaction_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

// TestConfigNegative: a negative duration, count or size is refused with its path, for
// every such key; zero takes the default.
func TestConfigNegative(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u@h/db")
	edit := func(old, new string) string {
		if !strings.Contains(goodYAML, old) {
			t.Fatalf("test bug: %q not in config", old)
		}
		return strings.Replace(goodYAML, old, new, 1)
	}
	stream := func(key string) string { return edit("    capture: poll\n", "    capture: poll\n    "+key+"\n") }
	top := func(key string) string { return goodYAML + key + "\n" }
	kafka := func(key string) string {
		return edit("  brokers: [localhost:9092]\n", "  brokers: [localhost:9092]\n  "+key+"\n")
	}
	for _, tc := range []struct{ yaml, want string }{
		{top("startup_timeout: -1s"), "startup_timeout: -1s is negative"},
		{top("health_interval: -1s"), "health_interval: -1s is negative"},
		{top("progress_interval: -1s"), "progress_interval: -1s is negative"},
		{kafka("timeout: -1s"), "kafka.timeout: -1s is negative"},
		{kafka("max_message_bytes: -1"), "kafka.max_message_bytes: -1 is negative"},
		{kafka("transaction_timeout: -1s"), "kafka.transaction_timeout: -1s is negative"},
		{stream("replication_factor: -1"), `stream "cache.shop".replication_factor: -1 is negative`},
		{edit("delete_retention: 48h", "delete_retention: -1s"), `stream "cache.shop".delete_retention: -1s is negative`},
		{stream("segment: -1s"), `stream "cache.shop".segment: -1s is negative`},
		{stream("min_compaction_lag: -1s"), `stream "cache.shop".min_compaction_lag: -1s is negative`},
		{stream("position_interval: -1s"), `stream "cache.shop".position_interval: -1s is negative`},
		{stream("reread_debounce: -1s"), `stream "cache.shop".reread_debounce: -1s is negative`},
		{stream("defaults: {poll_interval: -1s}"), `stream "cache.shop".defaults.poll_interval: -1s is negative`},
		{edit("poll_interval: 250ms", "poll_interval: -1s"), `view "items".poll_interval: -1s is negative`},
		{edit("overlap: 5s", "overlap: -5s"), "overlap"},
		{edit("overlap: 100", "overlap: -100"), "overlap must not be negative"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if _, err := ParseConfig([]byte(tc.yaml)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	// An Overlap built in Go is checked by Validate (YAML's is checked by its parser).
	c, err := ParseConfig([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	c.Streams[0].Views[0].Overlap = OverlapDuration(-time.Second)
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `view "items".overlap: must not be negative`) {
		t.Errorf("negative Go overlap: %v", err)
	}
	c, err = ParseConfig([]byte(stream("segment: 0s\n    replication_factor: 0") + "startup_timeout: 0s\n"))
	if err != nil || c.Streams[0].Segment != DefaultSegment || c.Streams[0].ReplicationFactor != DefaultReplicationFactor ||
		c.StartupTimeout != DefaultStartupTimeout || c.Kafka.TransactionTimeout != DefaultTransactionTimeout {
		t.Fatalf("zero values: %+v, %v", c, err)
	}
}

// TestTransactionalIDs: each stream has its own transactional id, derived from its topic
// unless set; two streams may not share one (their producers would fence each other).
func TestTransactionalIDs(t *testing.T) {
	two := func(id string) string {
		return "postgres: {dsn: postgres://u@h/db}\nkafka: {brokers: [b:9092]}\nstreams:\n" +
			"  - {topic: a, capture: poll, views: [{name: v, sql: SELECT 1 AS id, key: [id]}]}\n" +
			"  - {topic: b, capture: poll, transactional_id: " + id + ", views: [{name: w, sql: SELECT 1 AS id, key: [id]}]}\n"
	}
	c, err := ParseConfig([]byte(two("custom")))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Streams[0].TransactionalID, c.Streams[1].TransactionalID; a != "statecast-distributor-a" || b != "custom" {
		t.Errorf("transactional ids %q, %q", a, b)
	}
	if _, err := ParseConfig([]byte(two("statecast-distributor-a"))); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `stream "b".transactional_id`) {
		t.Errorf("shared transactional id: %v", err)
	}
}

// TestConfigEnv: ${NAME} is expanded in values after the YAML is parsed: a secret with " #"
// is taken whole, a reference in a comment needs no variable, and an unset variable is an
// error naming it, its line and its field.
func TestConfigEnv(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u:pa ss #word@h/db")
	c, err := ParseConfig([]byte("# postgres.dsn: ${TEST_DIST_COMMENTED_OUT}\n" + goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if c.Postgres.DSN != "postgres://u:pa ss #word@h/db" {
		t.Errorf("dsn %q", c.Postgres.DSN)
	}
	_, err = ParseConfig([]byte(strings.Replace(goodYAML, "${TEST_DIST_DSN}", "${TEST_DIST_UNSET_VAR}", 1)))
	if want := "line 3: postgres.dsn: environment variable TEST_DIST_UNSET_VAR is not set"; !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want ErrConfig containing %q", err, want)
	}
}

// TestLoadConfigFile: LoadConfig reads a file as ParseConfig reads bytes; its errors wrap
// ErrConfig and name the file.
func TestLoadConfigFile(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u@h/db")
	path := filepath.Join(t.TempDir(), "distributor.yaml")
	if err := os.WriteFile(path, []byte(goodYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil || c.Postgres.DSN != "postgres://u@h/db" || len(c.Streams[0].Views) != 2 {
		t.Fatalf("%+v, %v", c, err)
	}
	if err := os.WriteFile(path, []byte(goodYAML+"extra: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), path+": line 27: field extra not found in type distributor.Config") {
		t.Errorf("err = %v", err)
	}
	if _, err := LoadConfig(path + ".missing"); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}

const defaultsYAML = `
postgres: {dsn: postgres://u@h/db}
kafka: {brokers: [localhost:9092]}
streams:
  - topic: shop
    capture: poll
    defaults:
      incremental: updated_at
      poll_interval: 2s
      overlap: 1s
      listen: shop_changed
      refresh_cron: "@every 30s"
      refresh_mode: rewrite
    views:
      - {name: a, sql: SELECT 1, key: [id]}
      - name: b
        sql: SELECT 2
        key: [id]
        poll_interval: 500ms
        overlap: 0
        refresh_mode: reconcile
      - {name: c, sql: SELECT 3, key: [id], incremental: version, overlap: 10, listen: other, refresh_cron: "0 * * * *"}
  - topic: other
    views:
      - {name: d, sql: SELECT 4, key: [id]}
`

// TestStreamDefaults: each view takes the settings it leaves unset from its stream's
// defaults, field by field; another stream's views are not affected.
func TestStreamDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(defaultsYAML))
	if err != nil {
		t.Fatal(err)
	}
	inherited := ViewSettings{Incremental: "updated_at", PollInterval: 2 * time.Second, Overlap: OverlapDuration(time.Second),
		Listen: "shop_changed", RefreshCron: "@every 30s", RefreshMode: ModeRewrite}
	views := c.Streams[0].Views
	for _, tc := range []struct {
		got  ViewSettings
		want ViewSettings
	}{
		{views[0].ViewSettings, inherited},
		{views[1].ViewSettings, ViewSettings{Incremental: "updated_at", PollInterval: 500 * time.Millisecond, Overlap: OverlapVersions(0),
			Listen: "shop_changed", RefreshCron: "@every 30s", RefreshMode: ModeReconcile}},
		{views[2].ViewSettings, ViewSettings{Incremental: "version", PollInterval: 2 * time.Second, Overlap: OverlapVersions(10),
			Listen: "other", RefreshCron: "0 * * * *", RefreshMode: ModeRewrite}},
		{c.Streams[1].Views[0].ViewSettings, ViewSettings{RefreshMode: ModeReconcile}}, // a wal stream: no polling defaults
	} {
		if tc.got != tc.want {
			t.Errorf("got  %+v\nwant %+v", tc.got, tc.want)
		}
	}
	// validating again changes nothing (New validates what LoadConfig validated)
	again := *c
	again.Streams = append([]StreamConfig(nil), c.Streams...)
	again.Streams[0].Views = append([]ViewConfig(nil), c.Streams[0].Views...)
	if err := again.Validate(); err != nil || !reflect.DeepEqual(again.Streams[0].Views, views) {
		t.Errorf("second Validate: %v\n%+v", err, again.Streams[0].Views)
	}
}

// TestOperationsDocConfig: the example configuration of docs/operations.md loads (its TLS
// files replaced by test ones of the same names) and means what its comments say.
func TestOperationsDocConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Configuration\n\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block under ## Configuration in docs/operations.md")
	}
	pki := testenv.NewPKI(t)
	example = strings.ReplaceAll(example, "/etc/kafka/", filepath.Dir(pki.CAFile)+"/")
	t.Setenv("STATECAST_PG_DSN", "postgres://u@h/db")
	t.Setenv("KAFKA_PASSWORD", "secret")
	c, err := ParseConfig([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	w, s := c.Streams[0], c.Streams[1]
	if c.Kafka.SASL.Password != "secret" || !c.Kafka.TLS.Enabled || s.ReplicationFactor != 3 || len(s.Views) != 2 {
		t.Fatalf("%+v", c)
	}
	if w.Capture != CaptureWAL || w.Slot != "statecast_shop" || w.Publication != "statecast_shop" || w.PositionInterval != DefaultPositionInterval ||
		w.ReplicaIdentity != ReplicaIdentityFull || len(w.Views) != 3 || w.Views[1].Depends != nil || s.Capture != CapturePoll {
		t.Fatalf("the wal stream %+v", w)
	}
	want := s.Defaults
	want.RefreshMode = ModeReconcile
	if items, prices := s.Views[0], s.Views[1]; items.Listen != "items_changed" || prices.ViewSettings != want {
		t.Errorf("items %+v\nprices %+v", items.ViewSettings, prices.ViewSettings)
	}
}

// TestStreamDefaultsInherited: every field of ViewSettings is inherited (a field added to it
// is covered without touching this test).
func TestStreamDefaultsInherited(t *testing.T) {
	var d ViewSettings
	dv := reflect.ValueOf(&d).Elem()
	for i := range dv.NumField() {
		f := dv.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString("x")
		case time.Duration:
			f.SetInt(int64(time.Minute))
		case Overlap:
			f.Set(reflect.ValueOf(OverlapVersions(7)))
		default:
			t.Fatalf("ViewSettings.%s: no test value for %s", dv.Type().Field(i).Name, f.Type())
		}
	}
	var v ViewSettings
	v.inherit(&d)
	if v != d {
		t.Fatalf("inherited %+v, want %+v", v, d)
	}
}

// TestStreamDefaultsErrors: a bad default is reported once, under defaults; a defaults
// field that is not a view setting is refused.
func TestStreamDefaultsErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{`refresh_cron: "@every 30s"`, `refresh_cron: "61 * * * *"`, `stream "shop".defaults.refresh_cron`},
		{"refresh_mode: rewrite", "refresh_mode: replace", `stream "shop".defaults.refresh_mode`},
		{"listen: shop_changed", "listen: 'a b'", `stream "shop".defaults.listen`},
		{"poll_interval: 2s", "poll_interval: -2s", `stream "shop".defaults.poll_interval`},
		{"      incremental: updated_at", "      sql: SELECT 1", "field sql not found in type distributor.ViewSettings"},
	} {
		_, err := ParseConfig([]byte(strings.Replace(defaultsYAML, tc.old, tc.new, 1)))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrConfig containing %q", tc.new, err, tc.want)
			continue
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
			t.Errorf("%s: %d errors, want the default reported once:\n%v", tc.new, n, err)
		}
	}
	// a view inherits listen and overlap but not incremental from nowhere: named per view
	_, err := ParseConfig([]byte(strings.Replace(defaultsYAML, "      incremental: updated_at\n", "", 1)))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `view "a": overlap and listen need an incremental column`) {
		t.Errorf("err = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New(empty) = %v", err)
	}
	// New validates its own copy: the caller's config (shared by a test's two
	// distributors, say) is never written
	cfg := Config{Postgres: PostgresConfig{DSN: "postgres://u@h/db"}, Kafka: KafkaConfig{Config: kafkaconn.Config{Brokers: []string{"b:9092"}}},
		Streams: []StreamConfig{{Topic: "t", Capture: CapturePoll, Defaults: ViewSettings{Listen: "ch", Incremental: "u"},
			Views: []ViewConfig{{Name: "v", SQL: " SELECT 1 AS id; ", Key: []string{"id"}}}}}}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if v := cfg.Streams[0].Views[0]; v.ViewSettings != (ViewSettings{}) || v.SQL != " SELECT 1 AS id; " || cfg.Kafka.ClientID != "" || cfg.Streams[0].Segment != 0 {
		t.Errorf("New wrote the caller's config: %+v", cfg)
	}
}

func TestIncLess(t *testing.T) {
	for _, tc := range []struct {
		oid  uint32
		a, b string
		want bool
	}{
		{1184, "2026-01-01T00:00:05Z", "2026-01-01T00:00:05.1Z", true},
		{1184, "2026-01-01T00:00:05.12Z", "2026-01-01T00:00:05.1Z", false},
		{1114, "2026-01-01T00:00:05", "2026-01-01T00:00:05.000001", true},
		{1082, "2026-01-02", "2026-01-10", true},
		{20, "9", "10", true},
		{1700, "10.5", "9.75", false},
		{1700, "-1", "0.5", true},
	} {
		if got := incLess(tc.oid, tc.a, tc.b); got != tc.want {
			t.Errorf("incLess(%d, %s, %s) = %v", tc.oid, tc.a, tc.b, got)
		}
	}
}

// TestKafkaInFile: the kafka block is a kafkaconn.Config: its settings reach every sarama
// config the distributor makes, and its errors are config errors naming the field.
func TestKafkaInFile(t *testing.T) {
	t.Setenv("TEST_KAFKA_PASSWORD", "s3cr:t ${x}")
	file := func(kafka string) string {
		return "postgres: {dsn: postgres://u@h/db}\nkafka:\n  brokers: [localhost:9092]\n" + kafka +
			"\nstreams:\n  - topic: t\n    views:\n      - {name: v, sql: SELECT 1 AS id, key: [id]}\n"
	}
	c, err := ParseConfig([]byte(file(`  sasl: {mechanism: SCRAM-SHA-256, user: svc, password: "${TEST_KAFKA_PASSWORD}"}
  timeout: 2s`)))
	if err != nil {
		t.Fatal(err)
	}
	admin, prod := c.Kafka.clientConfig("-admin"), c.Kafka.SaramaProducerConfig()
	if admin.ClientID != DefaultClientID+"-admin" || prod.ClientID != DefaultClientID {
		t.Errorf("client ids %q, %q", admin.ClientID, prod.ClientID)
	}
	for _, sc := range []*sarama.Config{admin, prod} {
		if !sc.Net.SASL.Enable || sc.Net.SASL.Password != "s3cr:t ${x}" || sc.Net.SASL.SCRAMClientGeneratorFunc == nil || sc.Net.ReadTimeout != 2*time.Second {
			t.Errorf("sasl %+v, read timeout %v", sc.Net.SASL, sc.Net.ReadTimeout)
		}
	}
	if !prod.Producer.Idempotent || prod.Producer.RequiredAcks != sarama.WaitForAll {
		t.Errorf("producer settings lost")
	}
	if c.Kafka.TransactionTimeout != DefaultTransactionTimeout || c.Streams[0].TransactionalID != DefaultTransactionalIDPrefix+"t" {
		t.Errorf("transaction timeout %v, transactional id %q", c.Kafka.TransactionTimeout, c.Streams[0].TransactionalID)
	}
	for _, tc := range []struct{ kafka, want string }{
		{`  sasl: {mechanism: PLAIN, user: u, password: "${TEST_KAFKA_UNSET_PW}"}`, "TEST_KAFKA_UNSET_PW"},
		{"  tls: {enabled: true, ca_file: /nonexistent/ca.pem}", "kafka.tls.ca_file"},
		{"  tls: {enabled: true, verify: false}", "field verify not found"},
	} {
		if _, err := ParseConfig([]byte(file(tc.kafka))); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrConfig containing %q", tc.kafka, err, tc.want)
		}
	}
}

// TestRefreshCronDefault: a polled view without refresh_cron gets DefaultRefreshCron (every
// 10 minutes), so deletes reach the caches with the default config; "never" turns the
// schedule off; a view without incremental column has no schedule unless one is set.
func TestRefreshCronDefault(t *testing.T) {
	if DefaultRefreshCron != "@every 10m" {
		t.Errorf("DefaultRefreshCron = %q (docs/operations.md says every 10 minutes)", DefaultRefreshCron)
	}
	c, err := ParseConfig([]byte(`
postgres: {dsn: postgres://u@h/db}
kafka: {brokers: [localhost:9092]}
streams:
  - topic: shop
    capture: poll
    views:
      - {name: polled, sql: SELECT 1, key: [id], incremental: updated_at}
      - {name: never, sql: SELECT 1, key: [id], incremental: updated_at, refresh_cron: never}
      - {name: hourly, sql: SELECT 1, key: [id], incremental: updated_at, refresh_cron: "@hourly"}
      - {name: full, sql: SELECT 1, key: [id]}
  - topic: inherited
    capture: poll
    defaults: {incremental: updated_at, refresh_cron: never}
    views:
      - {name: a, sql: SELECT 1, key: [id]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v              ViewConfig
		cron, schedule string
	}{
		{c.Streams[0].Views[0], DefaultRefreshCron, DefaultRefreshCron},
		{c.Streams[0].Views[1], RefreshNever, ""},
		{c.Streams[0].Views[2], "@hourly", "@hourly"},
		{c.Streams[0].Views[3], "", ""},
		{c.Streams[1].Views[0], RefreshNever, ""},
	} {
		if tc.v.RefreshCron != tc.cron || tc.v.schedule() != tc.schedule {
			t.Errorf("view %s: refresh_cron %q, schedule %q; want %q, %q", tc.v.Name, tc.v.RefreshCron, tc.v.schedule(), tc.cron, tc.schedule)
		}
	}
}

// TestOverlapDefault: an unset overlap is DefaultOverlap for a time column and
// DefaultOverlapVersions for a version column; a set one, zero included, is kept.
func TestOverlapDefault(t *testing.T) {
	if DefaultOverlap != 10*time.Second || DefaultOverlapVersions != 1000 {
		t.Errorf("defaults %v, %d (docs/operations.md says 10s and 1000)", DefaultOverlap, DefaultOverlapVersions)
	}
	for _, tc := range []struct {
		set    Overlap
		isTime bool
		want   Overlap
	}{
		{Overlap{}, true, OverlapDuration(10 * time.Second)},
		{Overlap{}, false, OverlapVersions(1000)},
		{OverlapDuration(0), true, OverlapDuration(0)},
		{OverlapVersions(0), false, OverlapVersions(0)},
		{OverlapDuration(time.Second), true, OverlapDuration(time.Second)},
		{OverlapVersions(5), false, OverlapVersions(5)},
	} {
		v := ViewSettings{Overlap: tc.set}
		if got := v.overlapFor(tc.isTime); got != tc.want {
			t.Errorf("overlapFor(%+v, time %v) = %+v, want %+v", tc.set, tc.isTime, got, tc.want)
		}
	}
	// the default is resolved per column type: an unset overlap passes either check
	for _, oid := range []uint32{pgtype.TimestamptzOID, pgtype.Int8OID, pgtype.NumericOID} {
		if err := checkIncremental(&ViewConfig{Name: "v", ViewSettings: ViewSettings{Incremental: "c"}}, oid); err != nil {
			t.Errorf("type %d: %v", oid, err)
		}
	}
	_, args := pollQuery(&ViewConfig{SQL: "SELECT 1", ViewSettings: ViewSettings{Incremental: "c"}}, pgtype.TimestamptzOID, "2026-01-01T00:00:00Z")
	if args[1] != int64(10_000_000) {
		t.Errorf("poll query overlap %v µs, want 10 s", args[1])
	}
	_, args = pollQuery(&ViewConfig{SQL: "SELECT 1", ViewSettings: ViewSettings{Incremental: "c"}}, pgtype.Int8OID, "5")
	if args[1] != int64(1000) {
		t.Errorf("poll query overlap %v versions, want 1000", args[1])
	}
}

// TestKafkaWarnings: New warns of a weak Kafka setting it accepts (a broker certificate
// not verified).
func TestKafkaWarnings(t *testing.T) {
	var logs bytes.Buffer
	cfg := Config{Postgres: PostgresConfig{DSN: "postgres://u@h/db"}, Kafka: KafkaConfig{Config: kafkaconn.Config{Brokers: []string{"b:9092"},
		TLS: kafkaconn.TLS{Enabled: true, InsecureSkipVerify: true}}},
		Streams: []StreamConfig{{Topic: "t", Capture: CapturePoll, Defaults: ViewSettings{Listen: "ch", Incremental: "u"},
			Views: []ViewConfig{{Name: "v", SQL: "SELECT 1 AS id", Key: []string{"id"}}}}}}
	if _, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "kafka.tls.insecure_skip_verify") {
		t.Errorf("no warning:\n%s", logs.String())
	}
}

// TestCaptureNames: a slot or publication name that PostgreSQL would not keep as it is
// (longer than 63 bytes), or that could leave a quoting on its way into START_REPLICATION
// (a quote, a backslash, a newline), is refused at validation with the field's path; a
// publication name that only needs quoting (upper case, a space) is accepted.
func TestCaptureNames(t *testing.T) {
	conf := func(field, value string) string {
		return "postgres: {dsn: postgres://u@h/db}\nkafka: {brokers: [b:9092]}\nstreams:\n" +
			"  - topic: shop\n    " + field + ": " + value + "\n    views: [{name: v, sql: SELECT 1 AS id, key: [id]}]\n"
	}
	long := strings.Repeat("p", 64)
	for _, tc := range []struct{ field, value string }{
		{"publication", `"x', binary 'false"`},
		{"publication", `"x\"y"`},
		{"publication", `"x\\y"`},
		{"publication", `"x\ny"`},
		{"publication", long},
		{"slot", `"x'y"`},
		{"slot", strings.Repeat("s", 64)},
		{"slot", "Shop"},
	} {
		_, err := ParseConfig([]byte(conf(tc.field, tc.value)))
		if want := `stream "shop".` + tc.field + ":"; !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %s: %v, want ErrConfig naming %s", tc.field, tc.value, err, want)
		}
	}
	c, err := ParseConfig([]byte(conf("publication", `"Shop Pub"`)))
	if err != nil || c.Streams[0].Publication != "Shop Pub" {
		t.Fatalf("publication Shop Pub: %v", err)
	}
	if _, err := ParseConfig([]byte(conf("publication", strings.Repeat("p", 63)))); err != nil {
		t.Fatalf("a 63-byte publication name: %v", err)
	}
}

// TestReadSettings: a wal stream re-reads with DefaultReadSettings unless it sets its own
// (an empty map keeps the server's); a name that is no setting's, an empty value, and
// read_settings on a poll stream are refused with their path.
func TestReadSettings(t *testing.T) {
	t.Setenv("TEST_DIST_DSN", "postgres://u@h/db")
	wal := func(extra string) string {
		return `
postgres: {dsn: "${TEST_DIST_DSN}"}
kafka: {brokers: [localhost:9092]}
streams:
  - topic: cache.wal
` + extra + `
    views:
      - {name: items, sql: "SELECT id, name FROM items", key: [id]}
`
	}
	for _, tc := range []struct {
		extra string
		want  map[string]string
	}{
		{"", DefaultReadSettings},
		{"    read_settings: {}", map[string]string{}},
		{"    read_settings: {work_mem: 64MB, pg_trgm.similarity_threshold: \"0.5\"}", map[string]string{"work_mem": "64MB", "pg_trgm.similarity_threshold": "0.5"}},
	} {
		c, err := ParseConfig([]byte(wal(tc.extra)))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		if got := c.Streams[0].ReadSettings; !reflect.DeepEqual(got, tc.want) || got == nil {
			t.Errorf("%q: read settings %v, want %v", tc.extra, got, tc.want)
		}
		if got := c.Streams[0].ReadConnections; got != DefaultReadConnections {
			t.Errorf("%q: read connections %d, want the default", tc.extra, got)
		}
	}
	if c, err := ParseConfig([]byte(wal("    read_connections: 1"))); err != nil || c.Streams[0].ReadConnections != 1 || c.poolConns() != 4+2 {
		t.Errorf("read_connections: 1: %v", err)
	}
	if c, _ := ParseConfig([]byte(wal(""))); c != nil {
		c.Streams[0].ReadSettings["random_page_cost"] = "9"
		if DefaultReadSettings["random_page_cost"] != "1.1" {
			t.Fatal("a stream's settings alias the defaults")
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{wal(`    read_settings: {"random_page_cost; DROP TABLE x": "1"}`), `stream "cache.wal".read_settings: "random_page_cost; DROP TABLE x" is not a PostgreSQL setting's name`},
		{wal(`    read_settings: {random_page_cost: ""}`), `stream "cache.wal".read_settings.random_page_cost: empty value`},
		{wal("    read_connections: -2"), `stream "cache.wal".read_connections: -2 is negative`},
		{strings.Replace(goodYAML, "    capture: poll\n", "    capture: poll\n    read_settings: {work_mem: 4MB}\n", 1), "read_settings and read_connections are for capture: wal"},
		{strings.Replace(goodYAML, "    capture: poll\n", "    capture: poll\n    read_connections: 2\n", 1), "read_settings and read_connections are for capture: wal"},
	} {
		if _, err := ParseConfig([]byte(tc.yaml)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want ErrConfig containing %q", err, tc.want)
		}
	}
}
