package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// sarama starts one process-wide metrics goroutine that never ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "distributor.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	good := `postgres: {dsn: "postgres://x@127.0.0.1/db"}
kafka: {brokers: ["127.0.0.1:9092"]}
streams:
  - topic: shop
    capture: poll
    views:
      - {name: items, sql: "SELECT id, name, updated_at FROM items", key: [id], incremental: updated_at}
      - {name: prices, sql: "SELECT item_id, shop_id, price FROM prices", key: [item_id, shop_id]}
`
	tests := []struct{ name, body, want string }{
		{"ok", good, "ok — 1 stream(s), 2 view(s)"},
		{"unknown field", strings.Replace(good, "key: [id]", "key: [id], colour: red", 1), "colour"},
		{"bad cron", strings.Replace(good, "key: [id],", "key: [id], refresh_cron: \"every minute\",", 1), "refresh_cron"},
		{"no key", strings.Replace(good, "key: [item_id, shop_id]", "key: []", 1), "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Validate(&out, writeFile(t, tt.body))
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			t.Logf("%s", got)
			if (tt.name == "ok") != (err == nil) || !strings.Contains(got, tt.want) {
				t.Fatalf("Validate: out %q err %v; want %q", out.String(), err, tt.want)
			}
		})
	}
}

// TestAnalyze: validate -analyze asks PostgreSQL how each wal view's tables reach its rows
// (a parent reached through the join's equality) and says which views fall back to
// re-reading in full, and why; a view over a table without a key is refused with its fix.
func TestAnalyze(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE competitions (id int PRIMARY KEY, name text);
		CREATE TABLE events (id int PRIMARY KEY, competition_id int, name text);
		CREATE TABLE log (at timestamptz, msg text)`); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`postgres: {dsn: %q}
kafka: {brokers: ["127.0.0.1:9092"]}
streams:
  - topic: sb
    views:
      - {name: events, sql: "SELECT e.id, e.name, c.name AS competition FROM events e JOIN competitions c ON c.id = e.competition_id", key: [id]}
      - {name: ranked, sql: "SELECT id, rank() OVER (ORDER BY name) AS r FROM competitions", key: [id]}
`, dsn)
	var out bytes.Buffer
	if err := Analyze(ctx, &out, writeFile(t, body)); err != nil {
		t.Fatalf("Analyze: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"stream sb: capture wal, slot statecast_sb",
		"events: by the view's key",
		"competitions: by the view's key (through events.competition_id = competitions.id)",
		"view ranked:",
		"full re-read of the view on every change (a window function not partitioned by a column that holds its value)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	bad := strings.Replace(body, `name: ranked, sql: "SELECT id, rank() OVER (ORDER BY name) AS r FROM competitions", key: [id]`, `name: log, sql: "SELECT at, msg FROM log", key: [at]`, 1)
	out.Reset()
	if err := Analyze(ctx, &out, writeFile(t, bad)); err == nil || !strings.Contains(out.String(), "view log: CANNOT be captured") || !strings.Contains(out.String(), "REPLICA IDENTITY") {
		t.Fatalf("Analyze of a keyless table: %v\n%s", err, out.String())
	}
}

func TestStats(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status.json" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer admin-tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"streams":[{"name":"s","targets":2}]}`))
	}))
	defer srv.Close()
	var out bytes.Buffer
	o := StatsOptions{Addr: strings.TrimPrefix(srv.URL, "http://"), Token: "admin-tok"}
	if err := Stats(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\"targets\": 2") {
		t.Fatalf("Stats printed %q", out.String())
	}
	if err := Stats(context.Background(), &out, StatsOptions{Addr: srv.URL + "/nothing-here", Token: "admin-tok"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Stats on a wrong address: %v, want a 404 error", err)
	}
	if err := Stats(context.Background(), &out, StatsOptions{Addr: o.Addr}); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Stats without the token: %v, want a 401 error that says a token is needed", err)
	}
	// A token is never sent in plaintext beyond this host (192.0.2.1 is a documentation
	// address: nothing answers, so a request would time out rather than be refused).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, addr := range []string{"192.0.2.1:7072", "http://192.0.2.1:7072", "http://player.example:7072/"} {
		err := Stats(ctx, &out, StatsOptions{Addr: addr, Token: "admin-tok"})
		if err == nil || !strings.Contains(err.Error(), "TLS") || strings.Contains(err.Error(), "admin-tok") {
			t.Errorf("Stats with a token over plaintext to %s: %v, want it refused before sending", addr, err)
		}
	}
}

// TestGet reads a view through a real player over a real Kafka topic.
func TestGet(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "ctl", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("ctl-test"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	send := func(view string, value string, key ...string) {
		var v []byte
		if value != "" {
			v = []byte(value)
		}
		m := record.Meta{View: view, Kind: record.KindRow, Epoch: 1, SourceTime: now, SourceLSN: "0/1"}
		if _, _, err := prod.SendMessage(recordsarama.ProducerMessage(topic, record.EncodeKey(view, key...), v, m)); err != nil {
			t.Fatal(err)
		}
	}
	send("items", `{"id":1,"name":"one"}`, "1")
	send("items", `{"id":2,"name":"two"}`, "2")
	send("items", `{"id":3,"name":"three"}`, "3")
	send("items", "", "3") // tombstone
	send("other", `{"x":1}`, "1")
	pos := &record.Position{LSN: "16/B374D848", Time: now}
	if _, _, err := prod.SendMessage(recordsarama.ProducerMessage(topic, record.PositionKey(), pos.Marshal(),
		record.Meta{Kind: record.KindPosition, SourceTime: now, SourceLSN: pos.LSN})); err != nil {
		t.Fatal(err)
	}
	_ = prod.Close()

	p, err := player.New(player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: brokers}, Streams: []player.StreamConfig{{Name: "s", Topic: topic}}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = p.Run(context.Background()); done <- struct{}{} }()
	go func() { _ = p.Serve(lis); done <- struct{}{} }()
	defer func() { _ = p.Close(); <-done; <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	o := GetOptions{Players: []string{lis.Addr().String()}, Stream: "s", View: "items"}
	var all bytes.Buffer
	if err := Get(ctx, &all, o); err != nil {
		t.Fatal(err)
	}
	want := "1\t{\"id\":1,\"name\":\"one\"}\n2\t{\"id\":2,\"name\":\"two\"}\n-- view items: 2 row(s)"
	if !strings.HasPrefix(all.String(), want) || !strings.HasSuffix(all.String(), ", source position 16/B374D848\n") {
		t.Fatalf("Get all:\n%s\nwant prefix:\n%s\nand the source position", all.String(), want)
	}
	o.WaitFor = "16/B374D848"
	all.Reset()
	if err := Get(ctx, &all, o); err != nil || !strings.HasPrefix(all.String(), want) {
		t.Fatalf("Get waiting for the source position: %v\n%s", err, all.String())
	}
	o.WaitFor = "16/B374D849"
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	if err := Get(short, &all, o); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "16/B374D849") {
		t.Fatalf("Get waiting for a position not reached: %v", err)
	}
	cancelShort()
	o.WaitFor = "not-an-lsn"
	if err := Get(ctx, &all, o); !errors.Is(err, cacheclient.ErrInvalidLSN) {
		t.Fatalf("Get with a bad -wait-for: %v", err)
	}
	o.WaitFor = ""
	var one bytes.Buffer
	o.Key = "2"
	if err := Get(ctx, &one, o); err != nil || one.String() != "{\"id\":2,\"name\":\"two\"}\n" {
		t.Fatalf("Get key 2: %q, %v", one.String(), err)
	}
	// A selection: the rows that pass, and the output says which.
	sel := o
	sel.Key, sel.Selection = "", cacheclient.Selection{Filter: `name != "one"`}
	var some bytes.Buffer
	if err := Get(ctx, &some, sel); err != nil || !strings.HasPrefix(some.String(), "2\t{\"id\":2,\"name\":\"two\"}\n-- view items selected by name != \"one\": 1 row(s)") {
		t.Fatalf("Get with a filter: %v\n%s", err, some.String())
	}
	o.Key = "3"
	if err := Get(ctx, &one, o); err == nil || !strings.Contains(err.Error(), `view items has no key "3"`) {
		t.Fatalf("Get deleted key: %v, want an error naming the view and key", err)
	}
	// A view the stream does not carry is refused by the player: Get says so at once.
	o.View, o.Key = "itemz", ""
	start := time.Now()
	if err := Get(ctx, &one, o); !errors.Is(err, cacheclient.ErrUnknownView) || !strings.Contains(err.Error(), `"itemz"`) ||
		time.Since(start) > 10*time.Second {
		t.Fatalf("Get of an unknown view: %v after %s, want the player's refusal at once", err, time.Since(start))
	}
}
