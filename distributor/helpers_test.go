package distributor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// env is one test's database and topic.
type env struct {
	t       testing.TB
	dsn     string
	brokers []string
	topic   string
	db      *pgx.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, brokers: testenv.KafkaBrokers(t), dsn: testenv.NewDatabase(t), topic: testenv.UniqueName("dist")}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() {
		closeConn(db)
		a, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("test"))
		if err == nil {
			_ = a.DeleteTopic(e.topic)
			_ = a.Close()
		}
	})
	return e
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// config returns a one-stream polling config with the given views.
func (e *env) config(views ...ViewConfig) Config {
	return Config{
		Postgres: PostgresConfig{DSN: e.dsn},
		Kafka:    KafkaConfig{Config: kafkaconn.Config{Brokers: e.brokers, ClientID: "test"}},
		Streams:  []StreamConfig{{Topic: e.topic, Capture: CapturePoll, Views: views}},
	}
}

// running is a Distributor run in the background.
type running struct {
	d        *Distributor
	cancel   context.CancelFunc
	finished chan struct{} // closed when Run returned; err is then set
	err      error
	stopped  bool
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("DIST_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// start runs a Distributor (after setup, if any, changed it); the test ends it (and
// checks it stopped cleanly) at cleanup.
func start(t *testing.T, cfg Config, setup ...func(*Distributor)) *running {
	t.Helper()
	d, err := New(cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, finished: make(chan struct{})}
	go func() {
		r.err = d.Run(ctx)
		close(r.finished)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.finished:
		if r.err != nil && !r.stopped {
			t.Errorf("Run: %v", r.err)
		}
		r.stopped = true
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func (r *running) waitReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		select {
		case <-r.finished:
			cancel() // Run ended: stop waiting
		case <-ctx.Done():
		}
	}()
	if err := r.d.WaitReady(ctx); err != nil {
		select {
		case <-r.finished:
			r.stopped = true
			t.Fatalf("Run ended before ready: %v", r.err)
		default:
		}
		t.Fatalf("WaitReady: %v", err)
	}
}

// rec is a record read back from the topic.
type rec struct {
	offset int64
	key    string
	value  []byte // nil: tombstone
	meta   record.Meta
}

func (r rec) String() string {
	return fmt.Sprintf("%d %s %s e%d %q=%s", r.offset, r.meta.View, r.meta.Kind, r.meta.Epoch, r.key, r.value)
}

// readAll reads the topic from its start to its current end, as a read_committed
// consumer sees it (records of aborted transactions are not there).
func readAll(t *testing.T, brokers []string, topic string) []rec {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("test-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// A transaction whose commit the producer saw acknowledged may still be above the last
	// stable offset: the coordinator writes the commit markers after it answers. Wait
	// (bounded) until the LSO passes the high-water mark seen now, so that a read right
	// after a publication returned includes it.
	hw, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	var oldest, end int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if oldest, end, err = kafkaconn.CommittedOffsets(client, topic, 0); err != nil {
			t.Fatal(err)
		}
		if end >= hw || time.Now().After(deadline) {
			break
		}
	}
	var out []rec
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = kafkaconn.ReadCommitted(ctx, client, topic, 0, oldest, end, func(m *sarama.ConsumerMessage) error {
		meta, err := recordsarama.Meta(m)
		if err != nil {
			return fmt.Errorf("offset %d: %w", m.Offset, err)
		}
		var v []byte
		if m.Value != nil {
			v = append([]byte{}, m.Value...)
		}
		out = append(out, rec{offset: m.Offset, key: string(m.Key), value: v, meta: meta})
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v at %d records (end %d)", topic, err, len(out), end)
	}
	return out
}

// waitFor reads the topic until cond holds (bounded).
func waitFor(t *testing.T, e *env, what string, cond func([]rec) bool) []rec {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		recs := readAll(t, e.brokers, e.topic)
		if cond(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeout waiting for %s; topic:\n%s", what, dump(recs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dump(recs []rec) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// rowsOf folds the row records of view into key → value (the state a cache would hold).
func rowsOf(recs []rec, view string) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if r.meta.View != view || r.meta.Kind != record.KindRow {
			continue
		}
		if r.value == nil {
			delete(m, r.key)
		} else {
			m[r.key] = string(r.value)
		}
	}
	return m
}

// kinds lists the records of view as "kind" or "row:key" / "tomb:key" strings.
func kinds(recs []rec, view string) []string {
	var out []string
	for _, r := range recs {
		if r.meta.View != view {
			continue
		}
		switch {
		case r.meta.Kind != record.KindRow:
			out = append(out, string(r.meta.Kind))
		case r.value == nil:
			out = append(out, "tomb:"+r.key)
		default:
			out = append(out, "row:"+r.key)
		}
	}
	return out
}

// lastEnd returns the last epoch-end of view.
func lastEnd(t *testing.T, recs []rec, view string) *record.EpochEnd {
	t.Helper()
	var end *record.EpochEnd
	for _, r := range recs {
		if r.meta.View == view && r.meta.Kind == record.KindEpochEnd {
			e, err := record.ParseEpochEnd(r.value)
			if err != nil {
				t.Fatal(err)
			}
			end = e
		}
	}
	return end
}

// lastPoll returns the last poll record of view (a zero rec when there is none).
func lastPoll(recs []rec, view string) rec {
	var out rec
	for _, r := range recs {
		if r.meta.View == view && r.meta.Kind == record.KindPoll {
			out = r
		}
	}
	return out
}

func countEnds(recs []rec, view string) int {
	n := 0
	for _, r := range recs {
		if r.meta.View == view && r.meta.Kind == record.KindEpochEnd {
			n++
		}
	}
	return n
}

// dbRows runs the view's SQL and returns key → JSON value as the record contract fixes it,
// computed independently of the distributor with PostgreSQL's own to_jsonb (for the simple
// column types the tests use) — used to compare a rebuilt cache with the database.
func (e *env) dbRows(view, sql string, key ...string) map[string]string {
	e.t.Helper()
	rows, err := e.db.Query(context.Background(), "SELECT to_jsonb(v)::text FROM ("+sql+") v")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			e.t.Fatal(err)
		}
		parts := make([]string, len(key))
		for i, k := range key {
			parts[i] = fmt.Sprint(m[k])
		}
		out[string(record.EncodeKey(view, parts...))] = canon(e.t, s)
	}
	return out
}

// canon re-marshals a JSON object with sorted keys, so two encodings compare by content.
func canon(t testing.TB, s string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func canonMap(t testing.TB, m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = canon(t, v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// connect opens another connection to the test database.
func (e *env) connect() *pgx.Conn {
	e.t.Helper()
	c, err := pgx.Connect(context.Background(), e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { closeConn(c) })
	return c
}

func createTopic(t *testing.T, e *env, partitions int32, policy string) {
	t.Helper()
	a, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(e.topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false); err != nil {
		t.Fatal(err)
	}
}

// newBenchEnv is newEnv for benchmarks.
func newBenchEnv(b *testing.B) *env {
	b.Helper()
	e := &env{t: b, brokers: testenv.KafkaBrokers(b), dsn: testenv.NewDatabase(b)}
	db, err := pgx.Connect(context.Background(), e.dsn)
	if err != nil {
		b.Fatal(err)
	}
	e.db = db
	b.Cleanup(func() { closeConn(db) })
	return e
}

func deleteTopicLater(tb testing.TB, brokers []string, topic string) {
	tb.Cleanup(func() {
		a, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("test"))
		if err == nil {
			_ = a.DeleteTopic(topic)
			_ = a.Close()
		}
	})
}

// readAllB counts the records of a topic.
func readAllB(tb testing.TB, brokers []string, topic string) int64 {
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("test-reader"))
	if err != nil {
		tb.Fatal(err)
	}
	defer client.Close()
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		tb.Fatal(err)
	}
	return end
}

// waitCond polls cond until it holds (bounded).
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timeout waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
