package distributor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// getReadyz is GET /readyz: its status code and body.
func getReadyz(t *testing.T, addr string) (int, Readiness) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r Readiness
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("readyz %d: %s: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, r
}

// waitReadyz waits until /readyz answers want (200 or 503) and cond holds of its body.
func waitReadyz(t *testing.T, addr string, want int, what string, cond func(Readiness) bool) Readiness {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, r := getReadyz(t, addr)
		if code == want && (cond == nil || cond(r)) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz: %s: still %d %+v", what, code, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyz: a distributor started while Kafka does not answer serves /livez at once,
// /readyz 503 while it retries, and becomes ready when Kafka answers; /readyz turns 503
// while PostgreSQL is unreachable and 200 again when it is back.
func TestReadyz(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	pg, dsn := testenv.PostgresProxy(t, e.dsn)
	kafka := testenv.NewProxy(t, e.brokers[0])
	kafka.Cut()
	cfg := e.config(itemsView())
	cfg.Postgres.DSN = dsn
	cfg.Kafka.Brokers = []string{kafka.Addr()}
	cfg.Kafka.Timeout = time.Second
	cfg.HTTPAddr = testenv.FreeAddr(t)
	cfg.HealthInterval = 200 * time.Millisecond
	r := start(t, cfg)

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + cfg.HTTPAddr + "/livez")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("livez = %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("livez not served while Kafka is down: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, rd := getReadyz(t, cfg.HTTPAddr); code != 503 || rd.Ready || rd.Phase != "starting" {
		t.Fatalf("readyz before Kafka answers = %d %+v, want 503 starting", code, rd)
	}
	time.Sleep(2 * time.Second) // a few start-up retries
	select {
	case <-r.finished:
		t.Fatalf("Run ended while Kafka was down: %v", r.err)
	default:
	}
	kafka.Restore()
	r.waitReady(t)
	waitReadyz(t, cfg.HTTPAddr, 200, "Kafka back", func(rd Readiness) bool { return rd.Streams[e.topic] == "active" })

	pg.Cut()
	rd := waitReadyz(t, cfg.HTTPAddr, 503, "PostgreSQL down", func(rd Readiness) bool { return !rd.Postgres.OK })
	if rd.Postgres.Error == "" || !rd.Kafka.OK {
		t.Errorf("readyz with PostgreSQL down: %+v", rd)
	}
	pg.Restore()
	waitReadyz(t, cfg.HTTPAddr, 200, "PostgreSQL back", func(rd Readiness) bool { return rd.Postgres.OK && rd.Streams[e.topic] == "active" })
}

// TestStartupTimeout: Run gives up when Kafka does not answer within startup_timeout.
func TestStartupTimeout(t *testing.T) {
	e := newEnv(t)
	kafka := testenv.NewProxy(t, e.brokers[0])
	kafka.Cut()
	cfg := e.config(itemsView())
	cfg.Kafka.Brokers = []string{kafka.Addr()}
	cfg.Kafka.Timeout = time.Second
	cfg.StartupTimeout = 2 * time.Second
	d, err := New(cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	err = d.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "startup_timeout") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the start-up timeout", err)
	}
	if took := time.Since(began); took < 2*time.Second || took > 30*time.Second {
		t.Errorf("Run gave up after %s, want about startup_timeout", took)
	}
}
