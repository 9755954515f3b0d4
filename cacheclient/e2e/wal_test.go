package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

type account struct {
	ID      int   `json:"id"`
	Balance int64 `json:"balance"`
}

func decodeAccount(_ string, b []byte) (account, error) {
	var a account
	err := json.Unmarshal(b, &a)
	return a, err
}

const (
	nAccounts = 40
	total     = nAccounts * 1000
)

// walPipeline is PostgreSQL → distributor (capture: wal) → Kafka → player → cacheclient,
// on the accounts table split into two views.
type walPipeline struct {
	dsn    string
	pool   *pgxpool.Pool
	client *cacheclient.Client
	low    *cacheclient.View[account] // accounts 1..nAccounts/2
	high   *cacheclient.View[account] // the others
	marks  *cacheclient.View[account] // marks: v in Balance
}

func startWALPipeline(t *testing.T) *walPipeline {
	t.Helper()
	ctx := context.Background()
	p := &walPipeline{dsn: testenv.NewDatabase(t)}
	var err error
	if p.pool, err = pgxpool.New(ctx, p.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pool.Close)
	if _, err := p.pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts SELECT i, 1000 FROM generate_series(1, `+strconv.Itoa(nAccounts)+`) i;
		CREATE TABLE marks (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO marks VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	e := newKafkaEnv(t)
	half := strconv.Itoa(nAccounts / 2)
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: p.dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: e.brokers, ClientID: "e2e"}},
		Streams: []distributor.StreamConfig{{Topic: e.topic, PositionInterval: 20 * time.Millisecond, Views: []distributor.ViewConfig{
			{Name: "low", SQL: "SELECT id, balance FROM accounts WHERE id <= " + half, Key: []string{"id"}},
			{Name: "high", SQL: "SELECT id, balance FROM accounts WHERE id > " + half, Key: []string{"id"}},
			{Name: "marks", SQL: "SELECT id, v FROM marks", Key: []string{"id"}},
		}}},
	}
	d, err := distributor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("distributor: %v", err)
		}
	})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	addr, _ := startPlayer(t, e)
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "s", Service: t.Name(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.client = c
	if p.low, err = cacheclient.Register(c, "low", decodeAccount); err != nil {
		t.Fatal(err)
	}
	if p.high, err = cacheclient.Register(c, "high", decodeAccount); err != nil {
		t.Fatal(err)
	}
	if p.marks, err = cacheclient.Register(c, "marks", func(_ string, b []byte) (account, error) {
		var m struct{ V int64 }
		err := json.Unmarshal(b, &m)
		return account{Balance: m.V}, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// sum returns the total balance a Cut shows over both views, and the rows it holds.
func (p *walPipeline) sum(cut *cacheclient.Cut) (int64, int) {
	var s int64
	n := 0
	for _, v := range []*cacheclient.View[account]{p.low, p.high} {
		v.In(cut).Range(func(_ string, a account) bool { s += a.Balance; n++; return true })
	}
	return s, n
}

// insertLSN commits nothing: it reads the WAL position after the caller's COMMIT.
func insertLSN(ctx context.Context, conn *pgx.Conn) (cacheclient.LSN, error) {
	var s string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return 0, err
	}
	return cacheclient.ParseLSN(s)
}

// TestWALAtomicTransfers: writers move amounts between accounts of the two views in
// multi-statement transactions (and some within a view); a reader that reads both views
// through one Cut never sees the total change — never half of a transaction, within a view
// or across the two — while read-your-writes requests (a write, its WAL position after
// COMMIT, WaitFor, a read) always see their own write.
func TestWALAtomicTransfers(t *testing.T) {
	p := startWALPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s, n := p.sum(p.client.Read()); s != total || n != nAccounts {
		t.Fatalf("initial cut: total %d over %d rows, want %d over %d", s, n, total, nAccounts)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var transfers atomic.Int64
	errs := make(chan error, 16)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				from, to := 1+rng.IntN(nAccounts), 1+rng.IntN(nAccounts)
				amount := 1 + rng.IntN(50)
				_, err := p.pool.Exec(ctx, fmt.Sprintf("BEGIN; UPDATE accounts SET balance = balance - %d WHERE id = %d; UPDATE accounts SET balance = balance + %d WHERE id = %d; COMMIT", amount, from, amount, to))
				if err != nil {
					_, _ = p.pool.Exec(ctx, "ROLLBACK")
					if ctx.Err() == nil && !isConflict(err) {
						errs <- fmt.Errorf("transfer: %w", err)
						return
					}
					continue
				}
				transfers.Add(1)
			}
		}(uint64(w + 1))
	}
	// The reader: every Cut shows the same total.
	var reads atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cut := p.client.Read()
			if s, n := p.sum(cut); s != total || n != nAccounts {
				errs <- fmt.Errorf("cut at position %d shows total %d over %d rows, want %d over %d: part of a transaction", cut.Position(), s, n, total, nAccounts)
				return
			}
			reads.Add(1)
		}
	}()
	// Read-your-writes under that load.
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var waits []time.Duration
	for i := int64(1); i <= 100; i++ {
		if _, err := conn.Exec(ctx, "UPDATE marks SET v = $1 WHERE id = 1", i); err != nil {
			t.Fatal(err)
		}
		pos, err := insertLSN(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := p.client.WaitFor(ctx, pos); err != nil {
			t.Fatalf("WaitFor(%s): %v", pos, err)
		}
		waits = append(waits, time.Since(start))
		if m, ok := p.marks.Get(cacheclient.Key("1")); !ok || m.Balance != i {
			t.Fatalf("after WaitFor(%s) the cache shows %+v (found %v), want v = %d", pos, m, ok, i)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if transfers.Load() < 50 || reads.Load() < 50 {
		t.Fatalf("too little load: %d transfers, %d reads", transfers.Load(), reads.Load())
	}
	t.Logf("%d transfers, %d consistent reads, WaitFor: %s", transfers.Load(), reads.Load(), summarize(waits))
}

func isConflict(err error) bool { return strings.Contains(err.Error(), "SQLSTATE 40") }

func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	var max, sum time.Duration
	for _, d := range ds {
		sum += d
		if d > max {
			max = d
		}
	}
	return fmt.Sprintf("%d waits, mean %s, max %s", len(ds), sum/time.Duration(len(ds)), max)
}
