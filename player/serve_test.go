package player

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestRunServes: Run serves gRPC on Listen, HTTP on HTTPAddr (/livez, /readyz: 503 until
// the stream is ready, /healthz, /metrics from the
// given registry) and the admin endpoint on Admin.Addr (/status, /status.json, which
// HTTPAddr does not serve), and stops them when it returns.
func TestRunServes(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "player", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	meta := record.Meta{View: "v", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	if _, _, err := prod.SendMessage(recordsarama.ProducerMessage(topic, record.EncodeKey("v", "1"), []byte(`{"id":1}`), meta)); err != nil {
		t.Fatal(err)
	}
	_ = prod.Close()

	cfg := Config{Insecure: true, Listen: testenv.FreeAddr(t), HTTPAddr: testenv.FreeAddr(t), Kafka: kafkaconn.Config{Brokers: brokers},
		Streams: []StreamConfig{{Name: "s", Topic: topic}}, ShutdownGrace: 2 * time.Second, Admin: AdminConfig{Addr: testenv.FreeAddr(t)}}
	reg := prometheus.NewRegistry()
	marker := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_marker_total", Help: "marker"})
	reg.MustRegister(marker)
	p, err := New(cfg, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Before Run: live, not ready.
	pre := httptest.NewServer(p.Handler())
	for path, want := range map[string]int{"/livez": 200, "/readyz": 503, "/healthz": 200} {
		resp, err := http.Get(pre.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (path == "/readyz" && !strings.Contains(string(b), `"s":"starting"`)) {
			t.Errorf("%s before Run: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	pre.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	getFrom := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(path string) (int, string) { return getFrom(cfg.HTTPAddr, path) }
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get("/healthz")
		if code == 200 && strings.Contains(body, `"s":"ready"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Errorf("/readyz once the stream is ready: %d %s", code, body)
	}
	if code, _ := get("/livez"); code != 200 {
		t.Errorf("/livez: %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "test_marker_total 0") {
		t.Errorf("/metrics: %d %s", code, body)
	}
	if code, body := getFrom(cfg.Admin.Addr, "/status.json"); code != 200 || !strings.Contains(body, `"topic": "`+topic+`"`) {
		t.Errorf("/status.json: %d %s", code, body)
	}
	if code, body := getFrom(cfg.Admin.Addr, "/status"); code != 200 || !strings.Contains(body, `"topic": "`+topic+`"`) {
		t.Errorf("/status without Accept: %d %s, want the JSON", code, body)
	}
	req, _ := http.NewRequest("GET", "http://"+cfg.Admin.Addr+"/status", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("/status for a browser: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "<html>") {
			t.Errorf("/status for a browser: %d %s", resp.StatusCode, b)
		}
	}
	for _, path := range []string{"/status", "/status.json"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("%s on the read-only endpoint: %d, want 404", path, code)
		}
	}

	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(hctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if hctx.Err() != nil {
			t.Fatalf("grpc health on %s: %v %v", cfg.Listen, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	for _, addr := range []string{cfg.Listen, cfg.HTTPAddr, cfg.Admin.Addr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			t.Errorf("%s still served after Run returned", addr)
		}
	}
}

// TestRunAddressTaken: an address in use fails Run before it connects to Kafka.
func TestRunAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Listen = ln.Addr().String() }, "player: listen:"},
		{func(c *Config) { c.HTTPAddr = ln.Addr().String() }, "player: http_addr:"},
	} {
		// no broker listens on port 1: connecting would fail with another error
		cfg := Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"127.0.0.1:1"}}, Streams: []StreamConfig{{Name: "s"}}}
		tc.mod(&cfg)
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run = %v, want %q", err, tc.want)
		}
		_ = p.Close()
	}
}
