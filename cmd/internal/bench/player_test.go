package bench

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

func TestCheckVerdict(t *testing.T) {
	if got := CheckVerdict(nil); got != "ok (ordered, unique, reliable, resumable)" {
		t.Errorf("CheckVerdict(nil) = %q", got)
	}
	if got, want := CheckVerdict(errors.New("ordered: t0\nunique: t1")), "VIOLATIONS: ordered: t0 | unique: t1"; got != want {
		t.Errorf("CheckVerdict = %q, want %q", got, want)
	}
}

// startTestPlayer starts a player on a fresh topic of the real broker with targets t.
func startTestPlayer(t *testing.T, targets Targets) (*Player, []string, string) {
	t.Helper()
	brokers := testenv.KafkaBrokers(t)
	topic := newTestTopic(t, brokers)
	pr, err := StartPlayer(brokers, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Close)
	if err := pr.Connect(targets); err != nil {
		t.Fatal(err)
	}
	return pr, brokers, topic
}

// TestPlayer runs the in-process player with checked targets, a filtered one and a
// stalled one, against the real broker.
func TestPlayer(t *testing.T) {
	pr, brokers, topic := startTestPlayer(t, Targets{N: 3, Conns: 2,
		Views: func(i int) []string {
			if i == 1 {
				return []string{"w"}
			}
			return nil
		},
		Stalled: func(i int) bool { return i == 2 },
	})
	p, err := NewProducer(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		p.Send([]string{"v", "w", "v"}[i%3], i, 80)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	all, filtered := pr.Recv[0], pr.Recv[1]
	if !WaitFor(30*time.Second, func() bool { return all.Count() == 30 && filtered.Count() == 10 }) {
		t.Fatalf("targets have %d and %d entries, want 30 and 10 (view w)", all.Count(), filtered.Count())
	}
	if err := pr.Check(); err != nil {
		t.Errorf("delivery checker: %v", err)
	}
	if n := len(pr.DispatchLatencies(0)); n != 40 {
		t.Errorf("%d dispatch → applied spans, want 40", n)
	}
	if h := pr.Histogram("statecast_player_delivery_delay_seconds"); h.Count == 0 {
		t.Error("the player's delivery delay histogram is empty")
	}
	if ov, _ := pr.Recoveries(); ov != 0 {
		t.Errorf("%d budget overflows for 30 small entries", ov)
	}
}

// TestPlayerHoldDispatch fills the log while the main fetcher is held.
func TestPlayerHoldDispatch(t *testing.T) {
	pr, brokers, topic := startTestPlayer(t, Targets{N: 1, Conns: 1})
	release := pr.HoldDispatch()
	defer release()
	p, err := NewProducer(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		p.Send("v", i, 64)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := pr.Recv[0].Count(); n != 0 {
		t.Fatalf("the target got %d entries while dispatch was held", n)
	}
	release()
	if !WaitFor(30*time.Second, func() bool { return pr.Recv[0].Count() == 10 }) {
		t.Fatalf("after release the target has %d entries, want 10", pr.Recv[0].Count())
	}
}

// TestDistributor runs a distributor over a small table in a DistEnv.
func TestDistributor(t *testing.T) {
	testenv.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := newArgs("test", []string{"-brokers", strings.Join(testenv.KafkaBrokers(t), ",")}, io.Discard)
	env, err := NewDistEnv(ctx, args, "CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)")
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	const rows = 25
	if _, err := env.Conn.Exec(ctx, "INSERT INTO t SELECT i, 'row ' || i FROM generate_series(1, "+strconv.Itoa(rows)+") i"); err != nil {
		t.Fatal(err)
	}
	topic := env.Topic("bench_test_dist")
	d, took, err := StartDistributor(ctx, distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.DSN},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.Brokers, ClientID: "cachebench-test"}},
		Streams: []distributor.StreamConfig{{Topic: topic, Views: []distributor.ViewConfig{
			{Name: "t", SQL: "SELECT id, v FROM t", Key: []string{"id"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took <= 0 {
		t.Errorf("start-up took %v", took)
	}
	// The snapshot epoch: begin, the rows, end, and the position record that ends it.
	if end, err := EndOffset(env.Brokers, topic); err != nil || end < rows+3 {
		t.Errorf("end offset %d, %v; want at least %d", end, err, rows+3)
	}
	raw, err := env.CreateTopic("bench_test_raw")
	if err != nil {
		t.Fatal(err)
	}
	if end, err := EndOffset(env.Brokers, raw); err != nil || end != 0 {
		t.Errorf("a created topic: end offset %d, %v", end, err)
	}
}
