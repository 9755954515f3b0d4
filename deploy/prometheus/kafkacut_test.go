package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// scraper scrapes a /metrics endpoint into a Prometheus TSDB, the way Prometheus does
// (each sample at the scrape's time), for rules to be evaluated over.
type scraper struct {
	t   *testing.T
	url string
	db  *teststorage.TestStorage
}

// scrape reads the endpoint once and stores its gauges and counters (what the rules
// evaluated here read) at now.
func (s *scraper) scrape(now time.Time) {
	s.t.Helper()
	resp, err := http.Get(s.url)
	if err != nil {
		s.t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		s.t.Fatalf("scrape: %v", err)
	}
	app := s.db.Appender(context.Background())
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			default:
				continue
			}
			b := labels.NewBuilder(labels.EmptyLabels()).Set(model.MetricNameLabel, name).Set("job", "distributor")
			for _, lp := range m.GetLabel() {
				b.Set(lp.GetName(), lp.GetValue())
			}
			if _, err := app.Append(0, b.Labels(), now.UnixMilli(), v); err != nil {
				s.t.Fatalf("append %s: %v", name, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		s.t.Fatal(err)
	}
}

// alertRule returns the alerting rule named name of alerts.yaml, ready to be evaluated.
func alertRule(t *testing.T, name string) *rules.AlertingRule {
	t.Helper()
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != name {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("alert %s: %v", name, err)
			}
			hold, err := model.ParseDuration(r.For)
			if err != nil {
				t.Fatalf("alert %s: for: %v", name, err)
			}
			return rules.NewAlertingRule(name, expr, time.Duration(hold), 0, labels.FromMap(r.Labels),
				labels.FromMap(r.Annotations), labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
		}
	}
	t.Fatalf("alerts.yaml has no alert %s", name)
	return nil
}

// statusOf reads the distributor's status page as JSON (what an operator's curl gets).
type statusOf struct {
	Kafka struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"kafka"`
	Postgres struct {
		OK bool `json:"ok"`
	} `json:"postgres"`
	Streams []distributor.StreamStatus `json:"streams"`
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, b)
	}
	return resp.StatusCode
}

// TestKafkaCutAlert: the shipped lag alert fires when Kafka is cut while commits go on.
// A wal stream runs on a dedicated broker, which is killed; commits continue. Its /metrics
// is scraped every 2s into a Prometheus TSDB and StatecastCaptureBehind, as alerts.yaml
// ships it (expression and for), is evaluated by Prometheus's rule engine at each scrape:
// it stays inactive while Kafka answers, and fires after the cut. Meanwhile the status
// page's JSON shows the slot's lag (bytes and time) growing and Kafka unreachable, and
// /readyz answers 503 saying so.
func TestKafkaCutAlert(t *testing.T) {
	if testing.Short() {
		t.Skip("about two and a half minutes: the alert's threshold and its for")
	}
	k := testenv.DedicatedKafka(t)
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE TABLE ticks (id int PRIMARY KEY, n bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO ticks SELECT g, 0 FROM generate_series(1, 10) g`); err != nil {
		t.Fatal(err)
	}
	slot := testenv.UniqueName("statecast_cut")
	t.Cleanup(func() { dropSlot(t, slot) }) // runs after the distributor stopped (registered first)

	topic := testenv.UniqueName("cut")
	cfg := distributor.Config{
		Postgres:       distributor.PostgresConfig{DSN: dsn},
		Kafka:          distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: k.Brokers, ClientID: "cut", Timeout: 2 * time.Second}},
		HealthInterval: time.Second,
		StartupTimeout: time.Minute,
		Streams: []distributor.StreamConfig{{Topic: topic, Capture: distributor.CaptureWAL, Slot: slot,
			Views: []distributor.ViewConfig{{Name: "ticks", SQL: "SELECT id, n FROM ticks", Key: []string{"id"}}}}},
	}
	reg := prom.NewRegistry()
	d, err := distributor.New(cfg, distributor.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Error("Run did not stop")
		}
	})
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := d.WaitReady(readyCtx); err != nil {
		t.Fatal(err)
	}
	public := httptest.NewServer(d.Handler())
	defer public.Close()
	admin := httptest.NewServer(d.AdminHandler())
	defer admin.Close()

	// Commits go on all along, one every 100ms.
	writeCtx, stopWrites := context.WithCancel(ctx)
	writes := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(writeCtx, dsn)
		if err != nil {
			writes <- err
			return
		}
		defer c.Close(context.Background())
		for i := 0; writeCtx.Err() == nil; i++ {
			if _, err := c.Exec(writeCtx, `UPDATE ticks SET n = n + 1 WHERE id = $1`, i%10+1); err != nil && writeCtx.Err() == nil {
				writes <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		writes <- nil
	}()
	defer func() {
		stopWrites()
		if err := <-writes; err != nil {
			t.Errorf("writes: %v", err)
		}
	}()

	s := &scraper{t: t, url: public.URL + "/metrics", db: teststorage.New(t)}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	query := rules.EngineQueryFunc(engine, s.db)
	rule := alertRule(t, "StatecastCaptureBehind")
	eval := func() rules.AlertState {
		now := time.Now()
		s.scrape(now)
		if _, err := rule.Eval(ctx, 0, now, query, nil, 0); err != nil {
			t.Fatalf("evaluating %s: %v", rule.Name(), err)
		}
		rule.SetEvaluationTimestamp(now) // what the rule group does after each evaluation
		return rule.State()
	}
	var st statusOf
	streamOf := func() distributor.StreamStatus {
		if len(st.Streams) != 1 {
			t.Fatalf("status: %d streams", len(st.Streams))
		}
		return st.Streams[0]
	}

	// Kafka answers: the slot follows, the alert stays inactive.
	for range 8 {
		if state := eval(); state != rules.StateInactive {
			t.Fatalf("%s is %v while Kafka answers; status %+v", rule.Name(), state, st)
		}
		time.Sleep(2 * time.Second)
	}
	getJSON(t, admin.URL+"/status.json", &st)
	if !st.Kafka.OK || !st.Postgres.OK || streamOf().SlotBehindSeconds > 10 || streamOf().SlotMeasuredAt.IsZero() {
		t.Fatalf("before the cut: status %+v, want both reachable and the slot measured, close behind", st)
	}

	k.Kill(t)
	cut := time.Now()
	var behindBytes []int64
	var behindSecs []float64
	fired := time.Duration(0)
	for time.Since(cut) < 3*time.Minute {
		time.Sleep(2 * time.Second)
		state := eval()
		getJSON(t, admin.URL+"/status.json", &st)
		ss := streamOf()
		behindBytes, behindSecs = append(behindBytes, ss.SlotBehindBytes), append(behindSecs, ss.SlotBehindSeconds)
		if state == rules.StateFiring {
			fired = time.Since(cut)
			break
		}
	}
	if fired == 0 {
		t.Fatalf("%s did not fire within 3 minutes of the cut; the slot's lag by scrape: %v B, %v s", rule.Name(), behindBytes, behindSecs)
	}
	t.Logf("%s fired %s after the cut (threshold 30s, for 1m); lag by scrape: %v B, %v s", rule.Name(), fired.Round(time.Second), behindBytes, behindSecs)
	alerts := rule.ActiveAlerts()
	if len(alerts) != 1 || alerts[0].Labels.Get("stream") != topic {
		t.Errorf("active alerts %v, want one for stream %s", alerts, topic)
	}
	// The lag grew while Kafka was cut, in bytes and in time.
	n := len(behindBytes)
	if n < 3 || behindBytes[n-1] <= behindBytes[0] || behindSecs[n-1] <= behindSecs[0] || behindSecs[n-1] < 30 {
		t.Errorf("the slot's lag by scrape: %v B, %v s: want both growing, past 30s", behindBytes, behindSecs)
	}
	if ss := streamOf(); ss.SlotConfirmed == "" || time.Since(ss.SlotMeasuredAt) > 10*time.Second {
		t.Errorf("status %+v: want the slot's confirmed position, measured within the last seconds", ss)
	}
	if st.Kafka.OK || st.Kafka.Error == "" || !st.Postgres.OK {
		t.Errorf("status: Kafka %+v, PostgreSQL %+v: want Kafka unreachable with its error, PostgreSQL reachable", st.Kafka, st.Postgres)
	}
	var rd distributor.Readiness
	if code := getJSON(t, public.URL+"/readyz", &rd); code != http.StatusServiceUnavailable || rd.Kafka.OK || rd.Ready {
		t.Errorf("/readyz %d %+v: want 503 with Kafka down", code, rd)
	}
}

// dropSlot drops the test's replication slot once nothing streams from it.
func dropSlot(t *testing.T, slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testenv.PostgresDSN(t))
	if err != nil {
		t.Logf("drop slot %s: %v", slot, err)
		return
	}
	defer c.Close(ctx)
	for ctx.Err() == nil {
		_, err := c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
		var left bool
		if err == nil {
			err = c.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&left)
		}
		if err == nil && !left {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("drop slot %s: %v", slot, fmt.Errorf("still there: %w", ctx.Err()))
}
