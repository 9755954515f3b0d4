package distributor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const goodYAML = `
postgres:
  dsn: ${TEST_DIST_DSN}
kafka:
  brokers: [localhost:9092]
http_addr: 127.0.0.1:0
streams:
  - topic: cache.shop
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
		{"bad duration", edit("poll_interval: 250ms", "poll_interval: fast"), "line 16: cannot unmarshal !!str `fast` into time.Duration"},
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New(empty) = %v", err)
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
