package sportsbook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/examples/sportsbook/demo"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreAnyFunction("github.com/IBM/sarama.(*Broker).responseReceiver"),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgconn/ctxwatch.(*ContextWatcher).Watch.func1"),
	)
}

func logger() *slog.Logger {
	if os.Getenv("SPORTSBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// stack is the real pipeline: PostgreSQL (demo schema) → distributor (WAL capture) →
// Kafka → player.
type stack struct {
	dsn    string
	db     *pgx.Conn
	d      *distributor.Distributor
	addr   string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stopDist func() // stops the distributor and waits for it
}

func startStack(t *testing.T) *stack {
	t.Helper()
	brokers := testenv.KafkaBrokers(t)
	dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	if _, err := db.Exec(ctx, demo.Schema); err != nil {
		t.Fatalf("demo schema: %v", err)
	}
	cfg, err := distributor.ParseConfig(demo.DistributorYAML)
	if err != nil {
		t.Fatal(err)
	}
	// A unique topic, hence a unique replication slot (statecast_<topic>).
	topic := testenv.UniqueName("sportsbook")
	cfg.Postgres.DSN, cfg.Kafka.Brokers, cfg.Streams[0].Topic = dsn, brokers, topic
	d, err := distributor.New(*cfg, distributor.WithLogger(logger()))
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dsn: dsn, db: db, d: d}
	rctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	dctx, dcancel := context.WithCancel(rctx)
	distDone := make(chan struct{})
	go func() {
		defer close(distDone)
		if err := d.Run(dctx); err != nil {
			t.Errorf("distributor: %v", err)
		}
	}()
	s.stopDist = func() { dcancel(); <-distDone }
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := d.WaitReady(wctx); err != nil {
		t.Fatalf("distributor ready: %v", err)
	}
	p, err := player.New(player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: brokers}, Streams: []player.StreamConfig{{Name: "sportsbook", Topic: topic}},
		ProgressInterval: 100 * time.Millisecond, ShutdownGrace: time.Second}, player.WithLogger(logger()))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	s.wg.Add(2)
	go func() { defer s.wg.Done(); p.Run(rctx) }()
	go func() { defer s.wg.Done(); p.Serve(lis) }()
	if err := p.WaitReady(wctx); err != nil {
		t.Fatalf("player ready: %v", err)
	}
	t.Cleanup(func() {
		p.Close()
		cancel()
		s.wg.Wait()
		<-distDone
	})
	return s
}

func (s *stack) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := s.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sqlState runs each view's SQL (the fields the service keeps) on PostgreSQL.
func (s *stack) sqlState(t *testing.T) (events map[string]Event, markets map[string]Market, sels map[string]Selection) {
	t.Helper()
	ctx := context.Background()
	events, markets, sels = map[string]Event{}, map[string]Market{}, map[string]Selection{}
	rows, _ := s.db.Query(ctx, `SELECT e.id, e.competition_id, c.sport_id, e.name, e.status::text, e.tags
		FROM events e JOIN competitions c ON c.id = e.competition_id`)
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.CompetitionID, &e.SportID, &e.Name, &e.Status, &e.Tags); err != nil {
			t.Fatal(err)
		}
		events[itoa(e.ID)] = e
	}
	rows, _ = s.db.Query(ctx, `SELECT e.id, m.id, c.name, m.name, m.suspended
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`)
	for rows.Next() {
		var m Market
		if err := rows.Scan(&m.EventID, &m.MarketID, &m.Competition, &m.Market, &m.Suspended); err != nil {
			t.Fatal(err)
		}
		markets[cacheclient.Key(itoa(m.EventID), itoa(m.MarketID))] = m
	}
	rows, _ = s.db.Query(ctx, `SELECT market_id, id, name, price::text FROM selections`)
	for rows.Next() {
		var x Selection
		if err := rows.Scan(&x.MarketID, &x.ID, &x.Name, &x.Price); err != nil {
			t.Fatal(err)
		}
		sels[cacheclient.Key(itoa(x.MarketID), itoa(x.ID))] = x
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return
}

func sameView[T any](v *cacheclient.View[T], want map[string]T, eq func(a, b T) bool) error {
	if v.Len() != len(want) {
		return fmt.Errorf("view %s has %d rows, SQL %d", v.Name(), v.Len(), len(want))
	}
	for k, w := range want {
		got, ok := v.Get(k)
		if !ok || !eq(got, w) {
			return fmt.Errorf("view %s key %s: cache %+v (present %v), SQL %+v", v.Name(), k, got, ok, w)
		}
	}
	return nil
}

func eqEvent(a, b Event) bool {
	return a.ID == b.ID && a.CompetitionID == b.CompetitionID && a.SportID == b.SportID && a.Name == b.Name && a.Status == b.Status &&
		fmt.Sprint(a.Tags) == fmt.Sprint(b.Tags)
}
func eqMarket(a, b Market) bool { return a == b }
func eqSel(a, b Selection) bool { return a == b }

// converged reports whether every view equals its SQL query.
func converged(t *testing.T, st *stack, s *Service) error {
	ev, mk, sel := st.sqlState(t)
	if err := sameView(s.Events, ev, eqEvent); err != nil {
		return err
	}
	if err := sameView(s.Markets, mk, eqMarket); err != nil {
		return err
	}
	return sameView(s.Selections, sel, eqSel)
}

func getJSON(t *testing.T, h http.Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code == http.StatusOK && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return rec.Code
}

func ids(es []Event) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestEndToEnd: PostgreSQL → distributor → Kafka → player → cacheclient → HTTP. Updates
// and deletes in PostgreSQL reach the cache and its indexes; after writes stop, every view
// equals its SQL query; the epoch checks against the distributor's hashes pass.
func TestEndToEnd(t *testing.T) {
	st := startStack(t)
	s, err := New(Config{Client: cacheclient.Config{Addresses: []string{st.addr}, Stream: "sportsbook", Service: "sportsbook-test"}}, logger())
	if err != nil {
		t.Fatal(err)
	}
	// Handler order per key under concurrency: each selection's changes arrive in stream
	// order although 4 goroutines handle different keys at once.
	var hmu sync.Mutex
	lastPos := map[string]int64{}
	var orderErr error
	var handled int
	if err := cacheclient.OnChange(s.Selections, func(_ context.Context, ch cacheclient.Change[Selection]) error {
		time.Sleep(100 * time.Microsecond)
		hmu.Lock()
		defer hmu.Unlock()
		if ch.Position <= lastPos[ch.Key] && orderErr == nil {
			orderErr = fmt.Errorf("selection %s: change at position %d after %d", ch.Key, ch.Position, lastPos[ch.Key])
		}
		lastPos[ch.Key] = ch.Position
		handled++
		return nil
	}, cacheclient.WithConcurrency(4), cacheclient.WithInitialPass()); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if code := getJSON(t, h, "/readyz", nil); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	var status struct{ Ready bool }
	if code := getJSON(t, h, "/status", &status); code != 200 || !status.Ready {
		t.Fatalf("/status (JSON, as curl asks) %d %+v: want the ready cache's stats", code, status)
	}
	eventually(t, "initial convergence", func() bool { return converged(t, st, s) == nil })

	var d EventDetail
	if code := getJSON(t, h, "/events/1000", &d); code != 200 || d.Name == "" || len(d.Markets) != 3 || len(d.Markets[0].Selections) != 3 {
		t.Fatalf("/events/1000: %d %+v", code, d)
	}
	// The sport index (events joined with competitions): Roland-Garros (20) is the only
	// Tennis competition; when competition 12 moves to Tennis its events follow (the view
	// depends on competitions through its competition_id column: their rows are re-read).
	var tennis []Event
	if code := getJSON(t, h, "/sports/2/events", &tennis); code != 200 || len(tennis) != 4 {
		t.Fatalf("/sports/2/events: %d %+v", code, tennis)
	}
	st.exec(t, `UPDATE competitions SET sport_id = 2 WHERE id = 12`)
	eventually(t, "events follow their competition's sport", func() bool {
		tennis = nil
		getJSON(t, h, "/sports/2/events", &tennis)
		for _, e := range tennis {
			if e.SportID != 2 || (e.CompetitionID != 20 && e.CompetitionID != 12) {
				t.Fatalf("/sports/2/events: %+v", e)
			}
		}
		return len(tennis) == 8 && len(s.Events.ByIndexKeys("sport", "1")) == 8
	})
	// An update: appears in the cache and moves between index sets.
	st.exec(t, `UPDATE events SET status = 'live', tags = ARRAY['hot'] WHERE id = 1000`)
	eventually(t, "update visible", func() bool {
		var live []Event
		getJSON(t, h, "/status/live/events", &live)
		var hot []Event
		getJSON(t, h, "/tags/hot/events", &hot)
		return fmt.Sprint(ids(live)) == "[1000]" && fmt.Sprint(ids(hot)) == "[1000]"
	})
	var featured []Event
	getJSON(t, h, "/tags/featured/events", &featured)
	for _, e := range featured {
		if e.ID == 1000 {
			t.Fatal("event 1000 still indexed under its old tag")
		}
	}
	// A delete (cascading to markets and selections): removed from the views and indexes
	// as it commits (WAL capture; the config has no reconcile schedule).
	comp := d.CompetitionID
	st.exec(t, `DELETE FROM events WHERE id = 1005`)
	eventually(t, "delete visible", func() bool {
		if code := getJSON(t, h, "/events/1005", nil); code != http.StatusNotFound {
			return false
		}
		var es []Event
		getJSON(t, h, fmt.Sprintf("/competitions/%d/events", comp), &es)
		for _, e := range es {
			if e.ID == 1005 {
				return false
			}
		}
		return len(s.Markets.ByIndex("event", "1005")) == 0
	})
	// A burst of writes, then convergence.
	for i := range 30 {
		st.exec(t, `UPDATE selections SET price = price + 0.125 WHERE id % 7 = $1`, i%7)
		st.exec(t, `UPDATE markets SET suspended = NOT suspended WHERE id % 5 = $1`, i%5)
		if i%10 == 0 {
			st.exec(t, `INSERT INTO events (id, competition_id, name, home, away, starts_at) VALUES ($1, 20, 'new', 'a', 'b', now())`, 5000+i)
		}
	}
	var last error
	eventually(t, "convergence after writes stop", func() bool { last = converged(t, st, s); return last == nil })
	// A reconcile epoch of every view: the client checks its rows against the epoch's row
	// count and hash.
	before := s.Client.Stats().EpochChecks
	for _, v := range st.d.Views() {
		if err := st.d.Reconcile(ctx, v); err != nil {
			t.Fatalf("reconcile %s: %v", v, err)
		}
	}
	stats := s.Client.Stats()
	eventually(t, "the epoch checks", func() bool { stats = s.Client.Stats(); return stats.EpochChecks >= before+int64(len(st.d.Views())) })
	if stats.EpochMismatches != 0 || stats.DecodeErrors != 0 {
		t.Fatalf("epoch mismatches %d decode errors %d (checks %d)", stats.EpochMismatches, stats.DecodeErrors, stats.EpochChecks)
	}
	t.Logf("stats: position %d entries %d epoch checks %d resyncs %d", stats.Position, stats.EntriesApplied, stats.EpochChecks, stats.Resyncs)
	hmu.Lock()
	if orderErr != nil || handled == 0 {
		t.Errorf("handler order: %v (%d changes handled)", orderErr, handled)
	}
	hmu.Unlock()
	if code := getJSON(t, h, "/metrics", nil); code != 200 {
		t.Fatalf("metrics %d", code)
	}
}
