package distributor

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestListenWakesPoll: with an hour-long poll interval, a NOTIFY on the view's channel makes
// the change appear at once.
func TestListenWakesPoll(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := itemsView()
	v.PollInterval = time.Hour
	v.Listen = "items_changed"
	r := start(t, e.config(v))
	r.waitReady(t)
	// the LISTEN connection may start after the ready signal: notify until it is heard
	e.exec(`INSERT INTO items (id, name) VALUES (30, 'notified')`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.exec(`NOTIFY items_changed`)
		if rowsOf(readAll(t, e.brokers, e.topic), "items")["items|30"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("NOTIFY did not wake the poll")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCronRewrite: a cron schedule runs refresh epochs; mode rewrite republishes every row.
func TestCronRewrite(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := ViewConfig{Name: "items", SQL: itemsSQL, Key: []string{"id"}, ViewSettings: ViewSettings{RefreshCron: "@every 1s", RefreshMode: ModeRewrite}}
	r := start(t, e.config(v))
	r.waitReady(t)
	recs := waitFor(t, e, "a cron epoch", func(recs []rec) bool { return countEnds(recs, "items") >= 2 })
	end := lastEnd(t, recs, "items")
	if end.Published != 3 || end.Rows != 3 || end.Tombstones != 0 {
		t.Errorf("rewrite epoch-end %+v, want every row republished", end)
	}
	for _, rc := range recs {
		if rc.meta.Kind == "poll" {
			t.Errorf("poll record for a view without incremental column: %v", rc)
		}
	}
}

// TestHTTP: Run serves /healthz and /metrics on http_addr, and GET /status and POST
// /reconcile on the admin address, behind its token; http_addr does not serve them.
func TestHTTP(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	cfg := e.config(itemsView())
	cfg.HTTPAddr = testenv.FreeAddr(t)
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte("ops=admin-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Admin = AdminConfig{Addr: testenv.FreeAddr(t), Tokens: TokensConfig{File: tokens}}
	r := start(t, cfg)
	r.waitReady(t)
	token := "admin-secret-0123456789"
	at := func(addr string) func(method, path string, want int) string {
		return func(method, path string, want int) string {
			t.Helper()
			req, _ := http.NewRequest(method, "http://"+addr+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != want {
				t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
			}
			return string(b)
		}
	}
	get, admin := at(cfg.HTTPAddr), at(cfg.Admin.Addr)
	admin("POST", "/reconcile?view=items", 200)
	admin("POST", "/reconcile?view=nope", 404)
	if b := admin("GET", "/status", 200); !strings.Contains(b, e.topic) {
		t.Errorf("status: %s", b)
	}
	get("POST", "/reconcile?view=items", 404)
	get("GET", "/status", 404)
	token = "wrong"
	admin("POST", "/reconcile?view=items", 401)
	token = ""
	admin("GET", "/status", 401)
	if b := get("GET", "/healthz", 200); !strings.Contains(b, `"`+e.topic+`":"active"`) {
		t.Errorf("healthz: %s", b)
	}
	m := get("GET", "/metrics", 200)
	for _, want := range []string{
		`statecast_distributor_rows_published_total{stream="` + e.topic + `",view="items"} 3`,
		`statecast_distributor_last_epoch{stream="` + e.topic + `",view="items"} 2`,
		`statecast_distributor_active{stream="` + e.topic + `"} 1`,
		"statecast_distributor_admin_auth_failures_total 2", // the wrong token and the missing one
		`statecast_distributor_tokens_loaded{field="admin.tokens"} 1`,
		`statecast_distributor_tokens_file_refused{field="admin.tokens"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	r.stop(t)
	for _, addr := range []string{cfg.HTTPAddr, cfg.Admin.Addr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			t.Errorf("%s still served after Run returned", addr)
		}
	}
}

// TestMetricsServed: /metrics serves the Distributor's own registry by default and the
// one given by WithRegisterer when it is a Gatherer; a Registerer that is not one is not
// served (its owner serves it). Registering twice in one registry is a config error.
func TestMetricsServed(t *testing.T) {
	cfg := Config{Postgres: PostgresConfig{DSN: "postgres://u@h/db"}, Kafka: KafkaConfig{Config: kafkaconn.Config{Brokers: []string{"b:9092"}}},
		Streams: []StreamConfig{{Topic: "t", Views: []ViewConfig{{Name: "v", SQL: "SELECT 1 AS id", Key: []string{"id"}}}}}}
	metrics := func(d *Distributor) int {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Code
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if code := metrics(d); code != 200 {
		t.Errorf("default registry: /metrics = %d", code)
	}
	reg := prometheus.NewRegistry()
	if d, err = New(cfg, WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	if code := metrics(d); code != 200 {
		t.Errorf("registry: /metrics = %d", code)
	}
	if _, err := New(cfg, WithRegisterer(reg)); !errors.Is(err, ErrConfig) {
		t.Errorf("second New in one registry = %v, want ErrConfig", err)
	}
	if d, err = New(cfg, WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"a": "b"}, prometheus.NewRegistry()))); err != nil {
		t.Fatal(err)
	}
	if code := metrics(d); code != 404 {
		t.Errorf("not a Gatherer: /metrics = %d, want 404", code)
	}
}
