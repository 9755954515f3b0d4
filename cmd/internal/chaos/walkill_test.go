package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/player"
)

// TestWALKillDelivery: the distributor command (./cmd/distributor, capture: wal) is killed
// with SIGKILL at random moments while writers move amounts between accounts of two views,
// and started again each time. Two raw targets of a player record what they receive for the
// delivery checker, and a cacheclient follows the stream. At the end: the delivery checker
// finds the deliveries ordered, unique, reliable and resumable; the cache equals the views'
// SQL row by row; and no Cut ever showed the total changed.
func TestWALKillDelivery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "distributor")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/statecast/statecast/cmd/distributor").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/distributor: %v\n%s", err, out)
	}
	dsn := testenv.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	half := nAccounts / 2
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts SELECT i, 1000 FROM generate_series(1, `+strconv.Itoa(nAccounts)+`) i`); err != nil {
		t.Fatal(err)
	}
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "walkill", map[string]string{"cleanup.policy": "compact"})
	lowSQL := "SELECT id, balance FROM accounts WHERE id <= " + strconv.Itoa(half)
	highSQL := "SELECT id, balance FROM accounts WHERE id > " + strconv.Itoa(half)
	cfg := filepath.Join(t.TempDir(), "distributor.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`postgres: {dsn: %q}
kafka: {brokers: [%q]}
streams:
  - topic: %s
    position_interval: 20ms
    views:
      - {name: low, sql: %q, key: [id]}
      - {name: high, sql: %q, key: [id]}
`, dsn, brokers[0], topic, lowSQL, highSQL)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() *exec.Cmd {
		cmd := exec.Command(bin, "-config", cfg)
		if os.Getenv("CC_BENCH_LOG") != "" {
			cmd.Stderr = os.Stderr
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	proc := run()
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })

	// The first snapshot, then the player, its recorded targets and the cache. The slot's
	// creation waits for every transaction running on the server to end, other packages'
	// tests' too.
	if !bench.WaitFor(3*time.Minute, func() bool { n, _ := bench.EndOffset(brokers, topic); return n > nAccounts }) {
		t.Fatal("no snapshot from the distributor process")
	}
	pr, err := bench.StartPlayer(brokers, topic, func(c *player.Config) { c.ProgressInterval = 50 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.Connect(bench.Targets{N: 2, Views: func(i int) []string { return [][]string{{"low"}, nil}[i] }}); err != nil {
		t.Fatal(err)
	}
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{pr.Addr()}, Stream: topic, Service: t.Name(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	low, _ := cacheclient.Register(c, "low", decodeAccount)
	high, _ := cacheclient.Register(c, "high", decodeAccount)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	p := &killPipeline{low: low, high: high}

	// Writers and the invariant reader, while the distributor is killed and restarted.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var transfers, reads atomic.Int64
	errs := make(chan error, 8)
	for w := 0; w < 2; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w+1), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				from, to, amount := 1+rng.IntN(nAccounts), 1+rng.IntN(nAccounts), 1+rng.IntN(50)
				if _, err := pool.Exec(ctx, fmt.Sprintf("BEGIN; UPDATE accounts SET balance = balance - %d WHERE id = %d; UPDATE accounts SET balance = balance + %d WHERE id = %d; COMMIT", amount, from, amount, to)); err != nil {
					_, _ = pool.Exec(ctx, "ROLLBACK")
					if !isConflict(err) && ctx.Err() == nil {
						errs <- err
						return
					}
					continue
				}
				transfers.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s, n := p.sum(c.Read()); s != total || n != nAccounts {
				errs <- fmt.Errorf("a Cut shows total %d over %d rows, want %d over %d", s, n, total, nAccounts)
				return
			}
			reads.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := 0; i < 4; i++ {
		time.Sleep(time.Duration(400+rng.IntN(1200)) * time.Millisecond)
		_ = proc.Process.Kill()
		_ = proc.Wait()
		proc = run()
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	// Converged: the cache reflects every commit (WaitFor the WAL position after the last
	// one) and equals the SQL.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pos, err := insertLSN(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, pos); err != nil {
		t.Fatalf("WaitFor after the kills: %v", err)
	}
	want := map[int]int64{}
	rows, err := conn.Query(ctx, "SELECT id, balance FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		want[id] = b
	}
	cut := c.Read()
	for _, v := range []*cacheclient.View[account]{low, high} {
		v.In(cut).Range(func(_ string, a account) bool {
			if want[a.ID] != a.Balance {
				t.Errorf("account %d: cache %d, database %d", a.ID, a.Balance, want[a.ID])
			}
			delete(want, a.ID)
			return true
		})
	}
	if len(want) != 0 {
		t.Errorf("accounts missing from the cache: %v", want)
	}
	// Every record delivered to the recorded targets, exactly once, in order: once the
	// distributor stopped (the stream no longer grows), the targets catch up with its end.
	_ = proc.Process.Signal(os.Interrupt)
	_ = proc.Wait()
	var cerr error
	if !bench.WaitFor(time.Minute, func() bool { cerr = pr.Check(); return cerr == nil }) {
		t.Fatalf("delivery checker: %v", cerr)
	}
	t.Logf("%d transfers, %d consistent reads, 4 kills", transfers.Load(), reads.Load())
}

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

// killPipeline is the cache's two views of the accounts table: 1..nAccounts/2, the others.
type killPipeline struct {
	low, high *cacheclient.View[account]
}

// sum returns the total balance a Cut shows over both views, and the rows it holds.
func (p *killPipeline) sum(cut *cacheclient.Cut) (int64, int) {
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

// isConflict: a serialization failure or deadlock, which a writer retries.
func isConflict(err error) bool { return strings.Contains(err.Error(), "SQLSTATE 40") }
