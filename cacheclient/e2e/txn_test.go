package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/player"
)

// acct is a row of the views "a" and "b" of the transaction tests: an amount.
type acct struct {
	ID     int   `json:"id"`
	Amount int64 `json:"amount"`
}

func decodeAcct(_ string, b []byte) (acct, error) {
	var a acct
	err := json.Unmarshal(b, &a)
	return a, err
}

func acctJSON(id int, amount int64) string { return fmt.Sprintf(`{"id":%d,"amount":%d}`, id, amount) }

// ledger is the writer's side of the test: the amounts of a|i and b|i, whose sum never
// changes between source transactions.
type ledger struct {
	n     int
	a, b  []int64
	total int64
	lsn   uint64
}

func newLedger(n int) *ledger {
	l := &ledger{n: n, a: make([]int64, n), b: make([]int64, n)}
	for i := range n {
		l.a[i], l.b[i] = 100, 100
		l.total += 200
	}
	return l
}

// all returns the rows of every account (the first transaction).
func (l *ledger) all() []txnRow {
	var rows []txnRow
	for i := range l.n {
		rows = append(rows, txnRow{"a", fmt.Sprint(i), acctJSON(i, l.a[i])}, txnRow{"b", fmt.Sprint(i), acctJSON(i, l.b[i])})
	}
	return rows
}

// moves returns the rows of a transaction of n transfers between a random account of a
// and one of b (either way): each row is the account after its transfer, so the same key
// may appear several times and only the transaction's end balances the sum.
func (l *ledger) moves(rnd *rand.Rand, n int) []txnRow {
	var rows []txnRow
	for range n {
		i, j, x := rnd.IntN(l.n), rnd.IntN(l.n), int64(1+rnd.IntN(10))
		if rnd.IntN(2) == 0 {
			x = -x
		}
		l.a[i] -= x
		l.b[j] += x
		rows = append(rows, txnRow{"a", fmt.Sprint(i), acctJSON(i, l.a[i])}, txnRow{"b", fmt.Sprint(j), acctJSON(j, l.b[j])})
	}
	return rows
}

func (l *ledger) nextLSN() string {
	l.lsn += 0x1000
	return cacheclient.LSN(l.lsn).String()
}

// accounts is a client of the views a and b.
func accounts(t *testing.T, addrs []string, cfg cacheclient.Config) (*cacheclient.Client, *cacheclient.View[acct], *cacheclient.View[acct]) {
	t.Helper()
	cfg.Addresses, cfg.Stream, cfg.Service = addrs, "s", t.Name()
	cfg.BackoffMin, cfg.BackoffMax = 10*time.Millisecond, 200*time.Millisecond
	c, err := cacheclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cacheclient.Register(c, "a", decodeAcct)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cacheclient.Register(c, "b", decodeAcct)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, a, b
}

// sum is the total of both views in one Cut, and how many accounts it holds.
func sum(cut *cacheclient.Cut, a, b *cacheclient.View[acct]) (total int64, n int) {
	for _, v := range []*cacheclient.View[acct]{a, b} {
		v.In(cut).Range(func(_ string, x acct) bool { total += x.Amount; n++; return true })
	}
	return total, n
}

// TestTxnAtomicAcrossViewsThroughPlayer: source transactions that move amounts between the
// accounts of two views, each larger than a batch, than the player's send window and than
// a target's queue budget (which sends it back to recovery), flow through the real player
// while a reader checks through Client.Read that the total never changes: no reader sees
// part of a transaction, in one view or across the two.
func TestTxnAtomicAcrossViewsThroughPlayer(t *testing.T) {
	e := newKafkaEnv(t)
	l := newLedger(20)
	e.putTxn(l.nextLSN(), l.all()...)
	addr, _ := startPlayerWith(t, e, func(c *player.Config) {
		c.MaxBatchBytes = 4 << 10
		c.TargetBudgetBytes = 32 << 10 // send window 8 KiB, normal queue 16 KiB
	})
	c, a, b := accounts(t, []string{addr}, cacheclient.Config{MaxBatchEntries: 8})
	waitReady(t, c)
	var (
		stop    atomic.Bool
		reads   atomic.Int64
		seen    sync.Map // Cut positions seen by the reader
		badMu   sync.Mutex
		badRead string
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			cut := c.Read()
			if total, n := sum(cut, a, b); n != 2*l.n || total != l.total {
				badMu.Lock()
				badRead = fmt.Sprintf("at position %d: %d accounts, total %d (want %d)", cut.Position(), n, total, l.total)
				badMu.Unlock()
				return
			}
			seen.Store(cut.Position(), true)
			reads.Add(1)
		}
	}()
	rnd := rand.New(rand.NewPCG(5, 6))
	var last int64
	var lastLSN string
	for range 30 {
		lastLSN = l.nextLSN()
		last = e.putTxn(lastLSN, l.moves(rnd, 150)...) // 300 rows, ~30 KiB through the player
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitFor(ctx, mustParse(t, lastLSN)); err != nil {
		t.Fatalf("WaitFor(%s): %v", lastLSN, err)
	}
	stop.Store(true)
	wg.Wait()
	if badRead != "" {
		t.Fatalf("a reader saw part of a source transaction %s", badRead)
	}
	positions := 0
	seen.Range(func(any, any) bool { positions++; return true })
	t.Logf("%d reads over %d publications", reads.Load(), positions)
	if c.Position() != last || c.Stats().SourcePosition != mustParse(t, lastLSN) {
		t.Fatalf("position %d source %v, want %d %s", c.Position(), c.Stats().SourcePosition, last, lastLSN)
	}
	for i := range l.n {
		if x, _ := a.Get(fmt.Sprint(i)); x.Amount != l.a[i] {
			t.Fatalf("a|%d = %d, want %d", i, x.Amount, l.a[i])
		}
		if x, _ := b.Get(fmt.Sprint(i)); x.Amount != l.b[i] {
			t.Fatalf("b|%d = %d, want %d", i, x.Amount, l.b[i])
		}
	}
}

func mustParse(t *testing.T, s string) cacheclient.LSN {
	t.Helper()
	p, err := cacheclient.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTxnSnapshotInOpenTransactionThroughPlayer: a client that bootstraps while a
// transaction is half written (the player's snapshot holds its first rows) is not ready
// and shows nothing until the rest of the transaction arrives; then it holds all of it.
func TestTxnSnapshotInOpenTransactionThroughPlayer(t *testing.T) {
	e := newKafkaEnv(t)
	l := newLedger(10)
	e.putTxn(l.nextLSN(), l.all()...)
	p, addr, _ := startPlayerP(t, e, nil)
	first, _, _ := accounts(t, []string{addr}, cacheclient.Config{}) // follows the head, to know the player read it
	waitReady(t, first)
	rnd := rand.New(rand.NewPCG(7, 8))
	half := e.putTxn("", l.moves(rnd, 20)...) // the transaction's rows, not its end
	eventually(t, "the player read the open transaction", func() bool { return first.Stats().Head >= half })
	c, a, b := accounts(t, []string{addr}, cacheclient.Config{InstanceID: "late"})
	// The client acknowledges the snapshot's end once it has staged (or, wrongly, published)
	// it: nothing it shows changes after that until more records come.
	eventually(t, "the snapshot acknowledged", func() bool {
		for _, tg := range p.Status().Streams[0].Targets {
			if tg.ID == "late" && tg.LastAck >= half {
				return true
			}
		}
		return false
	})
	if c.Ready() || c.Position() != -1 {
		t.Fatalf("bootstrapped inside a transaction: ready %v position %d", c.Ready(), c.Position())
	}
	if _, n := sum(c.Read(), a, b); n != 0 {
		t.Fatalf("%d accounts visible before the transaction's end", n)
	}
	lsn := l.nextLSN()
	e.putTxn(lsn, l.moves(rnd, 5)...)
	waitReady(t, c)
	if total, n := sum(c.Read(), a, b); n != 2*l.n || total != l.total || c.Stats().SourcePosition != mustParse(t, lsn) {
		t.Fatalf("after the transaction's end: %d accounts, total %d, source %v", n, total, c.Stats().SourcePosition)
	}
}

// TestTxnReconnectInTransactionThroughPlayer: the player a client reads from stops while
// the client holds half a transaction (received and acked); the client fails over to
// another player, resumes from its published position, shows nothing of the transaction
// meanwhile, and applies it whole at its end.
func TestTxnReconnectInTransactionThroughPlayer(t *testing.T) {
	e := newKafkaEnv(t)
	l := newLedger(10)
	start := e.putTxn(l.nextLSN(), l.all()...)
	pA, addrA, stopA := startPlayerP(t, e, nil)
	addrB, _ := startPlayerWith(t, e, nil)
	var cnt counting
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addrA, addrB}, Stream: "s", Service: t.Name(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}, cacheclient.WithHooks(cnt.hooks()))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cacheclient.Register(c, "a", decodeAcct)
	b, _ := cacheclient.Register(c, "b", decodeAcct)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitReady(t, c)
	rnd := rand.New(rand.NewPCG(9, 10))
	before := append([]int64(nil), l.a...)
	half := e.putTxn("", l.moves(rnd, 20)...)
	// The client received and acked the open transaction's rows (the player's send window
	// would stall otherwise), without publishing them.
	eventually(t, "the open transaction acked", func() bool {
		for _, tg := range pA.Status().Streams[0].Targets {
			if tg.LastAck >= half {
				return true
			}
		}
		return false
	})
	if c.Position() != start {
		t.Fatalf("position %d moved inside the transaction (published at %d)", c.Position(), start)
	}
	stopA()
	eventually(t, "reconnected to the other player", func() bool { cnt.mu.Lock(); defer cnt.mu.Unlock(); return len(cnt.connects) >= 2 })
	for i := range l.n {
		if x, _ := a.Get(fmt.Sprint(i)); x.Amount != before[i] {
			t.Fatalf("a|%d = %d after the reconnect: part of the transaction is visible", i, x.Amount)
		}
	}
	lsn := l.nextLSN()
	last := e.putTxn(lsn, l.moves(rnd, 3)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitFor(ctx, mustParse(t, lsn)); err != nil {
		t.Fatal(err)
	}
	if total, n := sum(c.Read(), a, b); n != 2*l.n || total != l.total || c.Position() != last {
		t.Fatalf("after the transaction: %d accounts total %d at %d", n, total, c.Position())
	}
	for i := range l.n {
		if x, _ := b.Get(fmt.Sprint(i)); x.Amount != l.b[i] {
			t.Fatalf("b|%d = %d, want %d", i, x.Amount, l.b[i])
		}
	}
}

// TestWaitForThroughPlayer: WaitFor returns once the transaction carrying the position is
// applied, for many waiters at once; a stream whose position records carry no source
// position (polling) fails it with ErrNoSourcePosition.
func TestWaitForThroughPlayer(t *testing.T) {
	e := newKafkaEnv(t)
	l := newLedger(5)
	e.putTxn(l.nextLSN(), l.all()...)
	addr, _ := startPlayerWith(t, e, nil)
	c, a, _ := accounts(t, []string{addr}, cacheclient.Config{})
	waitReady(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rnd := rand.New(rand.NewPCG(11, 12))
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	base := l.lsn
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos := cacheclient.LSN(base + uint64(1+i%5)*0x1000) // the next five positions
			if err := c.WaitFor(ctx, pos); err != nil {
				errs <- err
				return
			}
			if got := c.Read().SourcePosition(); got < pos {
				errs <- fmt.Errorf("WaitFor(%v) returned at %v", pos, got)
			}
		}()
	}
	for range 5 {
		e.putTxn(l.nextLSN(), l.moves(rnd, 10)...)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range l.n {
		if x, _ := a.Get(fmt.Sprint(i)); x.Amount != l.a[i] {
			t.Fatalf("a|%d = %d after WaitFor, want %d", i, x.Amount, l.a[i])
		}
	}
	e.putTxn("-", l.moves(rnd, 1)...)
	if err := c.WaitFor(ctx, cacheclient.LSN(l.lsn+0x1000)); !errors.Is(err, cacheclient.ErrNoSourcePosition) {
		t.Fatalf("WaitFor on a polling stream: %v", err)
	}
}
