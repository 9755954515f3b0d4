package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
)

// The sportsbook workload: a schema of a sportsbook's real size (sports, competitions,
// teams, events, markets, selections, bets), the views a sportsbook's services publish
// from it — single tables, and the shapes that make a change of one row reach other rows
// (joins, aggregates, EXISTS, UNION ALL, window functions, DISTINCT ON, subqueries, CTEs)
// — and writers that change it as a sportsbook does: price updates, bets, suspensions,
// event status changes, a selection moved to another market. The schema, its seeding and
// the views are in sportsbook_schema.go.
//
// Every row has a seq column, the sequence number of the transaction that last wrote it,
// and every view exposes one (the greatest of the rows a view row is made of): that is
// what a Probe watches. Each writer owns the events e with e % writers == its index, with
// their markets, selections and bets, so one key of any view is only ever changed by one
// writer, in its commit order, and its seq only grows: a transaction that takes a row out
// of a group (a selection moved) also writes the group's parent row (both markets).

// The kinds of the sportsbook writers' transactions.
const (
	SBPrice   = "price"   // new prices of 2-5 selections of a market
	SBBets    = "bets"    // 1-3 bets placed
	SBSuspend = "suspend" // a market and its selections suspended, or reopened
	SBEvent   = "event"   // an event's status changed and one of its markets repriced
	SBMove    = "move"    // a selection moved to another market of its event
)

// SportsbookKinds are the transaction kinds with their share of the transactions, in
// percent.
var SportsbookKinds = []struct {
	Kind  string
	Share int
}{{SBPrice, 60}, {SBBets, 30}, {SBSuspend, 5}, {SBEvent, 3}, {SBMove, 2}}

// eventStatuses is the cycle of an event's status changes.
var eventStatuses = []string{"scheduled", "live", "suspended"}

// SportsbookTxn is one transaction of a sportsbook writer.
type SportsbookTxn struct {
	// Txn holds its writer, xid and commit times; Version is its seq, written into every
	// row it writes.
	Txn
	Kind string
	// Expect lists, per view, the keys of the rows whose seq is Version once it committed.
	Expect []ViewKeys

	prices  []sbPrice
	bets    []sbBet
	markets []int64 // markets whose seq it writes
	suspend *sbSuspend
	event   *sbEvent
	move    *sbMove
}

// ViewKeys are keys of one view.
type ViewKeys struct {
	View string
	Keys []string
}

type sbPrice struct {
	selection int64
	cents     int
}

type sbBet struct {
	selection, market, customer int64
	stake                       int
}

type sbSuspend struct {
	market    int64
	suspended bool
}

type sbEvent struct {
	id     int64
	status string
}

type sbMove struct{ selection, from, to int64 }

// sbPartition is what one writer knows of its rows: its events, each market's selections
// and status, each event's status. Its transactions only touch these rows.
type sbPartition struct {
	size      SportsbookSize
	events    []int64
	sels      map[int64][]int64 // market → its selections
	suspended map[int64]bool
	susp      []int64       // the suspended markets, in the order they were suspended
	status    map[int64]int // event → index in eventStatuses
	rng       *rand.Rand
}

func newPartition(size SportsbookSize, writer, writers int, seed uint64) *sbPartition {
	p := &sbPartition{size: size, sels: map[int64][]int64{}, suspended: map[int64]bool{}, status: map[int64]int{},
		rng: rand.New(rand.NewPCG(seed, uint64(writer)))}
	for e := int64(1); e <= int64(size.Events); e++ {
		if e%int64(writers) != int64(writer) {
			continue
		}
		p.events = append(p.events, e)
		for _, m := range p.marketsOf(e) {
			for k := range int64(size.SelectionsPerMarket) {
				p.sels[m] = append(p.sels[m], (m-1)*int64(size.SelectionsPerMarket)+k+1)
			}
		}
	}
	return p
}

// marketsOf are event e's markets, the main one first.
func (p *sbPartition) marketsOf(e int64) []int64 {
	n := int64(p.size.MarketsPerEvent)
	out := make([]int64, n)
	for j := range n {
		out[j] = (e-1)*n + j + 1
	}
	return out
}

func (p *sbPartition) eventOf(m int64) int64 { return (m-1)/int64(p.size.MarketsPerEvent) + 1 }

// main reports whether m is its event's main market, which stays open: every event keeps
// an open market, so the EXISTS view holds every event.
func (p *sbPartition) main(m int64) bool { return (m-1)%int64(p.size.MarketsPerEvent) == 0 }

func (p *sbPartition) anyEvent() int64 { return p.events[p.rng.IntN(len(p.events))] }

func (p *sbPartition) anyMarket() int64 {
	ms := p.marketsOf(p.anyEvent())
	return ms[p.rng.IntN(len(ms))]
}

func (p *sbPartition) kind() string {
	r := p.rng.IntN(100)
	for _, k := range SportsbookKinds {
		if r < k.Share {
			return k.Kind
		}
		r -= k.Share
	}
	return SBPrice
}

// reprice sets new prices for 2-5 selections of m (as many as it has, if fewer).
func (p *sbPartition) reprice(t *SportsbookTxn, m int64) {
	sels := slices.Clone(p.sels[m])
	p.rng.Shuffle(len(sels), func(i, j int) { sels[i], sels[j] = sels[j], sels[i] })
	for _, s := range sels[:min(len(sels), 2+p.rng.IntN(4))] {
		t.prices = append(t.prices, sbPrice{selection: s, cents: 101 + p.rng.IntN(2000)})
	}
	t.markets = append(t.markets, m)
}

// next plans the writer's next transaction, whose rows get seq, and records its effect on
// the partition (a transaction that fails ends the run).
func (p *sbPartition) next(seq int64) *SportsbookTxn {
	t := &SportsbookTxn{Txn: Txn{Version: seq, Op: OpMixed}, Kind: p.kind()}
	switch t.Kind {
	case SBPrice:
		p.reprice(t, p.anyMarket())
	case SBBets:
		for range 1 + p.rng.IntN(3) {
			m := p.anyMarket()
			sels := p.sels[m]
			t.bets = append(t.bets, sbBet{selection: sels[p.rng.IntN(len(sels))], market: m, customer: 1 + p.rng.Int64N(100_000), stake: 1 + p.rng.IntN(200)})
		}
	case SBSuspend:
		// Suspend an open market other than its event's main one, or reopen one.
		var m int64
		if len(p.susp) == 0 || p.rng.IntN(2) == 0 {
			for range 100 {
				if c := p.anyMarket(); !p.main(c) && !p.suspended[c] {
					m = c
					break
				}
			}
		}
		switch {
		case m != 0:
			p.suspended[m] = true
			p.susp = append(p.susp, m)
			t.suspend = &sbSuspend{market: m, suspended: true}
		case len(p.susp) > 0:
			k := p.rng.IntN(len(p.susp))
			m = p.susp[k]
			p.susp = slices.Delete(p.susp, k, k+1)
			delete(p.suspended, m)
			t.suspend = &sbSuspend{market: m}
		default: // no market to suspend (one market per event)
			t.Kind = SBPrice
			p.reprice(t, p.anyMarket())
		}
		if t.suspend != nil {
			t.markets = append(t.markets, m)
		}
	case SBEvent:
		e := p.anyEvent()
		p.status[e] = (p.status[e] + 1) % len(eventStatuses)
		t.event = &sbEvent{id: e, status: eventStatuses[p.status[e]]}
		ms := p.marketsOf(e)
		p.reprice(t, ms[p.rng.IntN(len(ms))])
	case SBMove:
		// A selection of a market with more than one to another market of the same event
		// (a market keeps a selection, an event its markets); if the event has no such
		// market, its markets are repriced instead.
		e := p.anyEvent()
		ms := p.marketsOf(e)
		p.rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		i := slices.IndexFunc(ms, func(m int64) bool { return len(p.sels[m]) > 1 })
		if i < 0 || len(ms) < 2 {
			t.Kind = SBPrice
			p.reprice(t, ms[0])
			break
		}
		from, to := ms[i], ms[(i+1)%len(ms)]
		k := p.rng.IntN(len(p.sels[from]))
		s := p.sels[from][k]
		p.sels[from] = slices.Delete(p.sels[from], k, k+1)
		p.sels[to] = append(p.sels[to], s)
		t.move = &sbMove{selection: s, from: from, to: to}
		t.markets = append(t.markets, from, to)
	}
	t.Rows = len(t.prices) + len(t.bets) + len(t.markets)
	if t.suspend != nil {
		t.Rows += len(p.sels[t.suspend.market])
	}
	if t.event != nil {
		t.Rows++
	}
	if t.move != nil {
		t.Rows++
	}
	t.Expect = p.expect(t)
	return t
}

// expect lists the rows of each view whose seq t's commit makes t.Version: the rows it
// writes, the aggregates of their groups, the view rows made of them.
func (p *sbPartition) expect(t *SportsbookTxn) []ViewKeys {
	key := func(id int64) string { return strconv.FormatInt(id, 10) }
	var events, marketEvents, markets, sels, betMarkets, ranked []string
	if t.event != nil {
		events = append(events, key(t.event.id))
	}
	for _, m := range t.markets {
		markets = append(markets, key(m))
		if e := key(p.eventOf(m)); !slices.Contains(marketEvents, e) {
			marketEvents = append(marketEvents, e)
		}
		for _, s := range p.sels[m] {
			ranked = append(ranked, key(s)) // every row of its partition shows the market's seq
		}
	}
	for _, pr := range t.prices {
		sels = append(sels, key(pr.selection))
	}
	if t.suspend != nil {
		for _, s := range p.sels[t.suspend.market] {
			sels = append(sels, key(s))
		}
	}
	if t.move != nil {
		sels = append(sels, key(t.move.selection))
	}
	for _, b := range t.bets {
		m := key(b.market)
		if !slices.Contains(betMarkets, m) && !slices.Contains(markets, m) {
			betMarkets = append(betMarkets, m)
		}
	}
	allEvents := append(slices.Clone(events), slices.DeleteFunc(slices.Clone(marketEvents), func(e string) bool { return slices.Contains(events, e) })...)
	var board []string
	for _, e := range events {
		board = append(board, cacheclient.Key("event", e))
	}
	for _, m := range markets {
		board = append(board, cacheclient.Key("market", m))
	}
	out := []ViewKeys{
		{"events", events}, {"markets", markets}, {"selections", sels},
		{"event_board", allEvents}, {"event_teams", events}, {"event_market_counts", marketEvents},
		{"market_bets", append(slices.Clone(markets), betMarkets...)}, {"events_open", events}, {"board_rows", board},
		{"selection_rank", ranked}, {"best_price", markets}, {"market_selection_counts", markets}, {"event_markets", allEvents},
	}
	return slices.DeleteFunc(out, func(vk ViewKeys) bool { return len(vk.Keys) == 0 })
}

// Sportsbook is the sportsbook's writers: connections each changing its own partition of
// the seeded rows.
type Sportsbook struct {
	size  SportsbookSize
	conns []*pgx.Conn
	parts []*sbPartition
	seq   atomic.Int64
}

// NewSportsbook connects writers to the seeded database dsn; seed makes their choices
// reproducible.
func NewSportsbook(ctx context.Context, dsn string, size SportsbookSize, writers int, seed uint64) (*Sportsbook, error) {
	if writers < 1 || writers > size.Events {
		return nil, fmt.Errorf("bench: sportsbook: %d writers for %d events", writers, size.Events)
	}
	sb := &Sportsbook{size: size}
	for i := range writers {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			sb.Close()
			return nil, err
		}
		sb.conns = append(sb.conns, conn)
		sb.parts = append(sb.parts, newPartition(size, i, writers, seed))
	}
	return sb, nil
}

// Close closes the writers' connections.
func (sb *Sportsbook) Close() {
	for _, c := range sb.conns {
		_ = c.Close(context.Background())
	}
}

// SportsbookRun says how long the writers run and how fast.
type SportsbookRun struct {
	Rate     float64 // commits per second, all writers together (0: as fast as they can)
	Duration time.Duration
	Txns     int
	// BeforeCommit sees each transaction after its statements ran, before COMMIT (where
	// the probes are told what to expect).
	BeforeCommit func(*SportsbookTxn)
}

// Run runs the writers until rc's limits or ctx's end and returns the transactions they
// committed.
func (sb *Sportsbook) Run(ctx context.Context, rc SportsbookRun) ([]*SportsbookTxn, error) {
	var interval time.Duration
	if rc.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(len(sb.conns)) / rc.Rate)
	}
	out := make([][]*SportsbookTxn, len(sb.conns))
	err := PaceWriters(ctx, PaceConfig{Writers: len(sb.conns), Interval: interval, Duration: rc.Duration, Calls: rc.Txns},
		func(ctx context.Context, i int) error {
			t, err := sb.txn(ctx, i, rc.BeforeCommit)
			if err != nil {
				return fmt.Errorf("bench: sportsbook writer %d: %w", i, err)
			}
			out[i] = append(out[i], t)
			return nil
		})
	var all []*SportsbookTxn
	for _, ts := range out {
		all = append(all, ts...)
	}
	return all, err
}

func (sb *Sportsbook) txn(ctx context.Context, i int, before func(*SportsbookTxn)) (*SportsbookTxn, error) {
	p, conn := sb.parts[i], sb.conns[i]
	t := p.next(sb.seq.Add(1))
	t.Writer = i
	seq := t.Version
	// BEGIN goes with the statements: one round trip before COMMIT, as a client that
	// pipelines its statements has, so that 4 writers reach 1,000 commits/s on a busy
	// machine.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	var xid string
	b.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(r pgx.Row) error { return r.Scan(&xid) })
	if len(t.prices) > 0 {
		ids, cents := make([]int64, len(t.prices)), make([]int32, len(t.prices))
		for k, pr := range t.prices {
			ids[k], cents[k] = pr.selection, int32(pr.cents)
		}
		b.Queue("UPDATE sb.selections AS s SET price = u.c / 100.0, seq = $3 FROM unnest($1::bigint[], $2::int[]) AS u(id, c) WHERE s.id = u.id",
			ids, cents, seq)
	}
	if t.suspend != nil {
		status := "open"
		if t.suspend.suspended {
			status = "suspended"
		}
		b.Queue("UPDATE sb.markets SET status = $2, seq = $3 WHERE id = $1", t.suspend.market, status, seq)
		b.Queue("UPDATE sb.selections SET status = $2, seq = $3 WHERE market_id = $1", t.suspend.market, status, seq)
	}
	if t.event != nil {
		b.Queue("UPDATE sb.events SET status = $2, seq = $3 WHERE id = $1", t.event.id, t.event.status, seq)
	}
	if t.move != nil {
		b.Queue("UPDATE sb.selections SET market_id = $2, seq = $3 WHERE id = $1", t.move.selection, t.move.to, seq)
	}
	if bump := slices.DeleteFunc(slices.Clone(t.markets), func(m int64) bool { return t.suspend != nil && m == t.suspend.market }); len(bump) > 0 {
		b.Queue("UPDATE sb.markets SET seq = $2 WHERE id = ANY($1::bigint[])", bump, seq)
	}
	if len(t.bets) > 0 {
		sels, custs, stakes := make([]int64, len(t.bets)), make([]int64, len(t.bets)), make([]int32, len(t.bets))
		for k, bt := range t.bets {
			sels[k], custs[k], stakes[k] = bt.selection, bt.customer, int32(bt.stake)
		}
		b.Queue(`INSERT INTO sb.bets (selection_id, customer_id, stake, placed_at, seq)
			SELECT s, c, st, now(), $4 FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS u(s, c, st)`, sels, custs, stakes, seq)
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("xid %q: %w", xid, err)
	}
	t.Xid = uint32(x)
	if before != nil {
		before(t)
	}
	t.Sent = time.Now()
	tag, err := conn.Exec(ctx, "COMMIT")
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if tag.String() != "COMMIT" {
		return nil, fmt.Errorf("commit: the server answered %s", tag)
	}
	committed = true
	t.Done = time.Now()
	return t, nil
}

// Check compares the tables with what the writers believe: each market's selections and
// status, each event's status.
func (sb *Sportsbook) Check(ctx context.Context) error {
	conn := sb.conns[0]
	var problems []string
	bad := func(format string, args ...any) {
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	owner := func(e int64) *sbPartition { return sb.parts[e%int64(len(sb.parts))] }
	rows, err := conn.Query(ctx, "SELECT id, market_id FROM sb.selections")
	if err != nil {
		return err
	}
	var id, m int64
	n := 0
	if _, err := pgx.ForEachRow(rows, []any{&id, &m}, func() error {
		n++
		if p := owner(sb.parts[0].eventOf(m)); !slices.Contains(p.sels[m], id) {
			bad("selection %d is in market %d, not where its writer put it", id, m)
		}
		return nil
	}); err != nil {
		return err
	}
	if n != sb.size.Selections() {
		bad("%d selections, want %d", n, sb.size.Selections())
	}
	rows, err = conn.Query(ctx, "SELECT id, status = 'suspended' FROM sb.markets")
	if err != nil {
		return err
	}
	var susp bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &susp}, func() error {
		if p := owner(sb.parts[0].eventOf(id)); p.suspended[id] != susp {
			bad("market %d suspended %v, its writer says %v", id, susp, p.suspended[id])
		}
		return nil
	}); err != nil {
		return err
	}
	rows, err = conn.Query(ctx, "SELECT id, status FROM sb.events")
	if err != nil {
		return err
	}
	var status string
	if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		if want := eventStatuses[owner(id).status[id]]; status != want {
			bad("event %d is %s, its writer says %s", id, status, want)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("bench: sportsbook: the tables differ from the writers': %s", strings.Join(problems, "; "))
	}
	return nil
}

// SportsbookPublication creates a publication of the sportsbook's tables, for a floor's
// slot.
func SportsbookPublication(ctx context.Context, conn *pgx.Conn, name string) error {
	_, err := conn.Exec(ctx, "CREATE PUBLICATION "+name+" FOR TABLES IN SCHEMA sb")
	return err
}
