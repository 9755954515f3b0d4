package distributor

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/pggate"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// The differential test: PostgreSQL is the oracle of the WAL capture. A mapping from a
// changed base row to the view rows it affects that misses one leaves a cache that differs
// from the view's SQL without anything failing, so the test looks for such a miss: random
// transactions on the schema of difftest_corpus_test.go, and after every batch of them,
// once the stream's source position passed the last commit,
//
//   - the cache (the topic folded as a consumer applies it: rows upserted, tombstones
//     deleted, a source transaction applied at its position record) equals, row by row
//     and byte for byte, the view's SQL run now and encoded by the distributor's own row
//     codec (pgjson, as its full reads encode), for every view of the corpus;
//   - every epoch-end's row count and hash equal those of the cache at its position;
//   - after some batches and at the end of every check, a reconcile of every view
//     (Distributor.Reconcile: a whole-view re-read) publishes no row: the incremental
//     path left nothing to correct, neither in the topic nor in the distributor's state.
//
// One database, distributor and topic serve every check of a run: a check starts by
// truncating every table and loading diffFixture in one transaction, which makes every
// view re-read in full, so a check's outcome depends on its own transactions only.
//
// Generation and shrinking are rapid's. Environment:
//
//	STATECAST_DIFF_SEED      the run's seed (else -rapid.seed, else a random one; printed)
//	STATECAST_DIFF_CHECKS    the number of checks (else -rapid.checks, else diffShortChecks)
//	STATECAST_DIFF_DURATION  stop starting checks after this long (make difftest's long run)
//	STATECAST_DIFF_ALL       also run the views whose divergence is known (diffView.known)
//	STATECAST_DIFF_VIEWS     only these views (comma-separated names)
const (
	envDiffDuration = "STATECAST_DIFF_DURATION"
	envDiffSeed     = "STATECAST_DIFF_SEED"
	envDiffChecks   = "STATECAST_DIFF_CHECKS"
	envDiffAll      = "STATECAST_DIFF_ALL"
	envDiffViews    = "STATECAST_DIFF_VIEWS"
)

// diffShortChecks is the run of make test: 3 to 4 s a check on a busy 2-core machine.
const diffShortChecks = 12

// diffShrinkTime bounds the minimization of a failing case (-rapid.shrinktime overrides).
const diffShrinkTime = 3 * time.Minute

func TestWALDifferential(t *testing.T) {
	seed, checks, duration := diffFlags(t)
	runDifferential(t, seed, checks, duration)
}

// TestWALDifferentialBulk is the differential test with the whole read of a bulk cycle
// (wal_bulk.go) taken by every cycle whose changes reach more than diffBulkShare of a
// view's rows, whatever the view's size: the corpus's views are a few rows, so about half
// the cycles of a view read it whole and stream it, the others take the mapped read, and
// each continues from the state (key → hash, reverse maps) the other left. The cache must
// equal the SQL and a reconcile must publish nothing, as with the mapped read alone; the
// test fails if no cycle took the whole read.
func TestWALDifferentialBulk(t *testing.T) {
	seed, checks, duration := diffFlags(t)
	if os.Getenv(envDiffChecks) == "" && !diffFlagSet("rapid.checks") {
		checks = max(1, checks/3)
	}
	// Set before the rig's distributor starts, restored after it stopped (cleanups run
	// last first).
	share, minRows := bulkShare, bulkMinRows
	bulkShare, bulkMinRows = diffBulkShare, 0
	t.Cleanup(func() { bulkShare, bulkMinRows = share, minRows })
	rig := runDifferential(t, seed, checks, duration)
	if t.Failed() {
		return
	}
	total := 0.0
	for _, v := range rig.views {
		n := bulkReads(t, rig.d.gather, rig.e.topic, v.Name)
		t.Logf("view %s: %v cycles read whole", v.Name, n)
		total += n
	}
	if total == 0 {
		t.Fatal("no cycle read a view whole: the bulk path was not tested")
	}
}

// diffBulkShare is TestWALDifferentialBulk's bulkShare.
const diffBulkShare = 0.3

// diffFlagSet reports whether the command line set flag name.
func diffFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runDifferential runs checks checks (or until duration) of the corpus from seed, on one
// rig, which it returns.
func runDifferential(t *testing.T, seed uint64, checks int, duration time.Duration) *diffRig {
	views := diffViews(t)
	what := fmt.Sprintf("%d checks", checks)
	if duration > 0 {
		what = fmt.Sprintf("%s or %d checks, whichever ends first", duration, checks)
	}
	t.Logf("seed %d, %s, %d views: replay with %s=%d", seed, what, len(views), envDiffSeed, seed)
	rig := newDiffRig(t, views)
	start := time.Now()
	done := 0
	defer func() {
		rig.stats.records = rig.cache.count
		t.Logf("%d checks of %d views in %s: %s", done, len(views), time.Since(start).Round(time.Second), &rig.stats)
	}()
	prop := func(rt *rapid.T) { rig.run(rt, drawDiffPlan(rt)) }
	// A run is a series of rapid runs of diffRound checks, the k-th from seed +
	// k·diffRoundStride (rapid's own seeds within a run stay below that): rapid ends a run
	// only at its count or near the test's deadline, which would also cut the shrinking
	// of a failure found near it. The seed and the number of checks replay a run, whatever
	// its duration.
	for k := 0; done < checks && (duration == 0 || time.Since(start) < duration); k++ {
		n := min(diffRound, checks-done)
		s := seed + uint64(k)*diffRoundStride
		t.Logf("checks %d–%d: -rapid.seed=%d -rapid.checks=%d", done+1, done+n, s, n)
		diffSetFlag(t, "rapid.seed", strconv.FormatUint(s, 10))
		rn := n
		if testing.Short() {
			rn *= 5 // rapid runs a fifth of its count under -short
		}
		diffSetFlag(t, "rapid.checks", strconv.Itoa(rn))
		rapid.Check(t, prop)
		done += n
	}
	return rig
}

// A run's rounds.
const (
	diffRound       = 10
	diffRoundStride = 1_000_003
)

// diffViews is the corpus of a run: STATECAST_DIFF_VIEWS's views, else every view but
// those with a known divergence (unless STATECAST_DIFF_ALL is set).
func diffViews(t *testing.T) []diffView {
	var names []string
	if s := os.Getenv(envDiffViews); s != "" {
		names = strings.Split(s, ",")
	}
	var out []diffView
	for _, v := range diffCorpus {
		switch {
		case names != nil:
			if !slices.Contains(names, v.name) {
				continue
			}
			names = slices.DeleteFunc(names, func(n string) bool { return n == v.name })
		case v.known != "" && os.Getenv(envDiffAll) == "":
			t.Logf("view %s left out: %s (%s=1 runs it)", v.name, v.known, envDiffAll)
			continue
		}
		out = append(out, v)
	}
	if len(names) > 0 {
		t.Fatalf("%s: no view %q in the corpus", envDiffViews, names)
	}
	return out
}

// diffFlags resolves the seed, the number of checks and the duration, and sets rapid's
// flags for fail files and shrinking (it reads its flags when Check starts; restored when
// the test ends).
func diffFlags(t *testing.T) (seed uint64, checks int, duration time.Duration) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	get := func(name string) string { return flag.Lookup(name).Value.String() }
	var err error
	switch s := os.Getenv(envDiffSeed); {
	case s != "":
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envDiffSeed, s, err)
		}
	case set["rapid.seed"] || get("rapid.seed") != "0": // the flag, or rapid's RAPID_SEED
		seed, _ = strconv.ParseUint(get("rapid.seed"), 10, 64)
	}
	for seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	// A fail file would be left in the source tree and replayed by every later run: the
	// seed replays the case instead.
	if !set["rapid.failfile"] {
		diffSetFlag(t, "rapid.nofailfile", "true")
	}
	// A check takes seconds: rapid's default 30s of shrinking tries a dozen smaller cases.
	// But not past half the time left before go test's timeout: its panic skips the
	// cleanups, and the run's replication slot would keep the server's WAL.
	if !set["rapid.shrinktime"] && os.Getenv("RAPID_SHRINKTIME") == "" {
		shrink := diffShrinkTime
		if d, ok := t.Deadline(); ok {
			shrink = max(10*time.Second, min(shrink, time.Until(d)/2))
		}
		diffSetFlag(t, "rapid.shrinktime", shrink.String())
	}
	switch s := os.Getenv(envDiffChecks); {
	case s != "":
		if checks, err = strconv.Atoi(s); err != nil || checks < 1 {
			t.Fatalf("%s=%q: want a positive number", envDiffChecks, s)
		}
	case set["rapid.checks"]:
		checks, _ = strconv.Atoi(get("rapid.checks"))
	default:
		checks = diffShortChecks
	}
	if testing.Short() {
		return seed, max(1, checks/5), 0 // a fifth, as rapid does; no long run
	}
	if s := os.Getenv(envDiffDuration); s != "" {
		if duration, err = time.ParseDuration(s); err != nil || duration <= 0 {
			t.Fatalf("%s=%q: want a positive duration", envDiffDuration, s)
		}
	}
	return seed, checks, duration
}

// diffSetFlag sets one of rapid's flags until the test ends.
func diffSetFlag(t *testing.T, name, value string) {
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// Plans: what one check does. Drawn whole before anything runs, so that the draws do not
// depend on what PostgreSQL or the distributor did (rapid replays and shrinks the draws).

type diffPlan struct{ batches []diffBatch }

// diffBatch is the transactions committed between two comparisons.
type diffBatch struct {
	txns []diffTxn
	// concurrent: the transactions are split between two connections that run at once
	// (their order, and so their outcome, is PostgreSQL's choice; the oracle reads it).
	concurrent bool
	reconcile  bool // reconcile every view after the comparison
	burst      bool // one-statement transactions sent in one round trip (execBurst)
}

type diffTxn struct{ stmts []string }

func drawDiffPlan(t *rapid.T) diffPlan {
	stmt := rapid.Custom(drawDiffStmt)
	txn := rapid.Custom(func(t *rapid.T) diffTxn {
		return diffTxn{stmts: rapid.SliceOfN(stmt, 1, 5).Draw(t, "statements")}
	})
	// A burst: a backlog (execBurst) of one-statement transactions, more than twice as
	// many as a cycle reads at once while it receives the rest (earlyTxns).
	one := rapid.Custom(func(t *rapid.T) diffTxn { return diffTxn{stmts: []string{drawDiffStmt(t)}} })
	batch := rapid.Custom(func(t *rapid.T) diffBatch {
		var b diffBatch
		if b.burst = rapid.IntRange(0, 9).Draw(t, "burst") == 9; b.burst {
			b.txns = rapid.SliceOfN(one, 2*earlyTxns+2, 2*earlyTxns+40).Draw(t, "burst transactions")
		} else {
			b.txns = rapid.SliceOfN(txn, 1, 4).Draw(t, "transactions")
		}
		b.concurrent = rapid.IntRange(0, 2).Draw(t, "concurrent") == 2
		b.reconcile = rapid.IntRange(0, 3).Draw(t, "reconcile") == 3
		return b
	})
	return diffPlan{batches: rapid.SliceOfN(batch, 1, 4).Draw(t, "batches")}
}

// The id ranges are small so that statements collide: a statement that violates a
// constraint is rolled back to its savepoint and the transaction goes on.
const (
	diffSports, diffTeams, diffEvents, diffMarkets, diffSelections = 4, 7, 8, 12, 18
)

var (
	diffStatuses = []string{"open", "suspended", "closed"}
	diffPrices   = []string{"1.25", "1.50", "1.90", "2.00", "2.50", "3.10", "5.00"}
	diffTimes    = []string{"2026-05-01 18:00Z", "2026-05-02 12:30Z", "2026-05-03 09:00Z"}
)

// diffOps are the statements a transaction draws from, with their weights. The first ones
// are the simplest: rapid shrinks a choice towards them.
var diffOps = []struct {
	weight int
	draw   func(t *rapid.T) string
}{
	{4, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE events SET status = '%s' WHERE id = %d", status(t), id(t, "event", diffEvents))
	}},
	{4, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE markets SET status = '%s' WHERE id = %d", status(t), id(t, "market", diffMarkets))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE selections SET status = '%s' WHERE id = %d", status(t), id(t, "selection", diffSelections))
	}},
	{4, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE selections SET price = %s WHERE id = %d", price(t), id(t, "selection", diffSelections))
	}},
	{2, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE sports SET name = '%s' WHERE id = %d", pick(t, "name", "soccer", "tennis", "golf", "darts"), id(t, "sport", diffSports))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE teams SET name = '%s', rating = %d WHERE id = %d", pick(t, "name", "lions", "tigers", "bears", "sharks"),
			rapid.IntRange(0, 3).Draw(t, "rating"), id(t, "team", diffTeams))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE markets SET name = '%s' WHERE id = %d", pick(t, "name", "winner", "total", "handicap"), id(t, "market", diffMarkets))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE events SET starts_at = '%s' WHERE id = %d", pick(t, "time", diffTimes...), id(t, "event", diffEvents))
	}},
	{2, func(t *rapid.T) string { // scores change
		return fmt.Sprintf("UPDATE scores SET home = home + %d WHERE event_id = %d", rapid.IntRange(0, 2).Draw(t, "goals"), id(t, "event", diffEvents))
	}},
	// Re-parenting: a changed foreign key.
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE markets SET event_id = %d WHERE id = %d", id(t, "event", diffEvents), id(t, "market", diffMarkets))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE selections SET market_id = %d WHERE id = %d", id(t, "market", diffMarkets), id(t, "selection", diffSelections))
	}},
	{2, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE events SET sport_id = %d WHERE id = %d", id(t, "sport", diffSports), id(t, "event", diffEvents))
	}},
	{2, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE events SET home_id = %d WHERE id = %d", id(t, "team", diffTeams), id(t, "event", diffEvents))
	}},
	{3, func(t *rapid.T) string { // a NULL join key, set and cleared
		away := "NULL"
		if rapid.Bool().Draw(t, "away set") {
			away = strconv.Itoa(id(t, "team", diffTeams))
		}
		return fmt.Sprintf("UPDATE events SET away_id = %s WHERE id = %d", away, id(t, "event", diffEvents))
	}},
	// Inserts (an id in use fails; an upsert for scores).
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("INSERT INTO markets VALUES (%d, %d, '%s', '%s')", id(t, "market", diffMarkets), id(t, "event", diffEvents),
			pick(t, "name", "winner", "total", "handicap"), status(t))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("INSERT INTO selections VALUES (%d, %d, %s, '%s')", id(t, "selection", diffSelections), id(t, "market", diffMarkets), price(t), status(t))
	}},
	{2, func(t *rapid.T) string {
		away := "NULL"
		if rapid.Bool().Draw(t, "away set") {
			away = strconv.Itoa(id(t, "team", diffTeams))
		}
		return fmt.Sprintf("INSERT INTO events VALUES (%d, %d, %d, %s, '%s', '%s')", id(t, "event", diffEvents), id(t, "sport", diffSports),
			id(t, "team", diffTeams), away, status(t), pick(t, "time", diffTimes...))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("INSERT INTO scores VALUES (%d, %d, %d) ON CONFLICT (event_id) DO UPDATE SET home = EXCLUDED.home, away = EXCLUDED.away",
			id(t, "event", diffEvents), rapid.IntRange(0, 3).Draw(t, "home"), rapid.IntRange(0, 3).Draw(t, "away"))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("INSERT INTO teams VALUES (%d, '%s', %d)", id(t, "team", diffTeams), pick(t, "name", "lions", "tigers", "bears", "sharks"), rapid.IntRange(0, 3).Draw(t, "rating"))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("INSERT INTO sports VALUES (%d, '%s')", id(t, "sport", diffSports), pick(t, "name", "soccer", "tennis", "golf", "darts"))
	}},
	// Deletes: a parent's cascade to its children (sports → events → markets → selections,
	// events → scores), a team's SET NULL of away_id (or a refusal: it is a home team).
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM selections WHERE id = %d", id(t, "selection", diffSelections))
	}},
	{2, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM markets WHERE id = %d", id(t, "market", diffMarkets))
	}},
	{2, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM events WHERE id = %d", id(t, "event", diffEvents))
	}},
	{3, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM scores WHERE event_id = %d", id(t, "event", diffEvents))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM teams WHERE id = %d", id(t, "team", diffTeams))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("DELETE FROM sports WHERE id = %d", id(t, "sport", diffSports))
	}},
	// Key changes (cascaded to the children's foreign keys).
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE selections SET id = %d WHERE id = %d", id(t, "selection", diffSelections), id(t, "selection", diffSelections))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE markets SET id = %d WHERE id = %d", id(t, "market", diffMarkets), id(t, "market", diffMarkets))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE events SET id = %d WHERE id = %d", id(t, "event", diffEvents), id(t, "event", diffEvents))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE teams SET id = %d WHERE id = %d", id(t, "team", diffTeams), id(t, "team", diffTeams))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE scores SET event_id = %d WHERE event_id = %d", id(t, "event", diffEvents), id(t, "event", diffEvents))
	}},
	// Statements that change several rows.
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE selections SET price = price + 0.25 WHERE market_id = %d", id(t, "market", diffMarkets))
	}},
	{1, func(t *rapid.T) string {
		return fmt.Sprintf("UPDATE markets SET status = '%s' WHERE event_id = %d", status(t), id(t, "event", diffEvents))
	}},
	// A truncate re-reads every view of the table in full (which corrects any divergence):
	// rare, so that most checks test the mapped path.
	{1, func(t *rapid.T) string { return "TRUNCATE " + pick(t, "leaf", "selections", "scores") }},
}

var diffOpsWeight = func() int {
	n := 0
	for _, op := range diffOps {
		n += op.weight
	}
	return n
}()

func drawDiffStmt(t *rapid.T) string {
	n := rapid.IntRange(0, diffOpsWeight-1).Draw(t, "op")
	for _, op := range diffOps {
		if n < op.weight {
			return op.draw(t)
		}
		n -= op.weight
	}
	panic("unreachable")
}

func id(t *rapid.T, what string, n int) int { return rapid.IntRange(1, n).Draw(t, what) }
func status(t *rapid.T) string              { return pick(t, "status", diffStatuses...) }
func price(t *rapid.T) string               { return pick(t, "price", diffPrices...) }
func pick(t *rapid.T, what string, from ...string) string {
	return rapid.SampledFrom(from).Draw(t, what)
}

// diffStats are a run's figures (printed at its end).
type diffStats struct {
	mu                                        sync.Mutex
	checks, batches, txns, stmts, failedStmts int
	comparisons, reconciles                   int
	records                                   int64
}

func (s *diffStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d property runs (with rapid's replays and shrinking), %d batches, %d transactions, %d statements (%d rolled back to their savepoint), %d view comparisons, %d view reconciles, %d records read",
		s.checks, s.batches, s.txns, s.stmts, s.failedStmts, s.comparisons, s.reconciles, s.records)
}

// diffRig is a run's database, distributor and cache.
type diffRig struct {
	t       *testing.T
	e       *env
	d       *Distributor
	views   []ViewConfig
	deps    map[string][]string // view → how each table is mapped (ViewDeps.Describe)
	conns   [2]*pgx.Conn        // the concurrent batches' connections
	encs    []*pgjson.Encoder   // per view, compiled by the first comparison
	gate    *pggate.Gate        // in front of the distributor's connections (execBurst)
	cache   *diffCache
	stats   diffStats
	logBuf  []string     // the current check's transactions and outcomes
	commits atomic.Int64 // transactions committed in the run
}

func newDiffRig(t *testing.T, corpus []diffView) *diffRig {
	e := newEnv(t)
	e.exec(diffSchema)
	e.exec("BEGIN; " + diffFixture + " COMMIT")
	r := &diffRig{t: t, e: e, deps: map[string][]string{}, encs: make([]*pgjson.Encoder, len(corpus))}
	for _, v := range corpus {
		r.views = append(r.views, ViewConfig{Name: v.name, SQL: v.sql, Key: v.key, Depends: v.depends})
	}
	cfg := e.walConfig(r.views...)
	// Unmapped views are re-read in full after every change of their tables, at most once
	// per debounce: the default would make many batches wait half a second.
	cfg.Streams[0].RereadDebounce = 5 * time.Millisecond
	// A burst is written while the gate holds the replication stream: released, it is a
	// backlog, which a cycle reads while it receives the rest (takeReading).
	gate, dsn, err := pggate.Start(cfg.Postgres.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gate.Close)
	cfg.Postgres.DSN = dsn
	r.gate = gate
	deps, err := Dependencies(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		if d.Err != nil {
			t.Fatalf("view %s: %v", d.View, d.Err)
		}
		r.deps[d.View] = d.Tables
		for _, line := range d.Tables {
			t.Logf("view %s: %s", d.View, line)
		}
	}
	run := start(t, cfg)
	run.waitReady(t)
	r.d = run.d
	for i := range r.conns {
		r.conns[i] = e.connect()
		if _, err := r.conns[i].Exec(context.Background(), "SET lock_timeout = '10s'"); err != nil {
			t.Fatal(err)
		}
	}
	client, err := sarama.NewClient(e.brokers, kafkaconn.NewConfig("test-diff"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	r.cache = newDiffCache(client, e.topic)
	return r
}

// run is one check: reset, then each batch, its comparison and its reconciles.
func (r *diffRig) run(rt *rapid.T, plan diffPlan) {
	ctx := context.Background()
	r.logBuf = r.logBuf[:0]
	r.stats.mu.Lock()
	r.stats.checks++
	r.stats.mu.Unlock()
	// The failure's message must not change while rapid shrinks the case (it keeps a
	// smaller case only if it fails with the same message): the details go to the log,
	// which rapid prints for the final, minimal case.
	fail := func(err error) {
		rt.Logf("%v\n\nthe check's transactions, from diffFixture (the run's seed %s; rapid names the check's):\n%s", err, flag.Lookup("rapid.seed").Value, strings.Join(r.logBuf, "\n"))
		var d *diffFailure
		if errors.As(err, &d) {
			rt.Fatalf("%s (view %s)", d.what, d.view)
		}
		rt.Fatal(err)
	}
	if err := r.reset(ctx); err != nil {
		fail(err)
	}
	if err := r.compare(ctx, "the reset"); err != nil {
		fail(err)
	}
	for i, b := range plan.batches {
		r.logBuf = append(r.logBuf, fmt.Sprintf("batch %d%s:", i+1, map[bool]string{true: " (two connections at once)"}[b.concurrent && (b.burst || len(b.txns) > 1)]))
		if err := r.execBatch(ctx, b); err != nil {
			fail(fmt.Errorf("batch %d: %w", i+1, err))
		}
		what := fmt.Sprintf("batch %d", i+1)
		if err := r.compare(ctx, what); err != nil {
			fail(err)
		}
		if b.reconcile || i == len(plan.batches)-1 {
			r.logBuf = append(r.logBuf, "reconcile of every view")
			if err := r.reconcileAll(ctx, what); err != nil {
				fail(err)
			}
		}
	}
}

// reset truncates every table and loads diffFixture, in one transaction: every view is
// re-read in full.
func (r *diffRig) reset(ctx context.Context) error {
	if _, err := r.e.db.Exec(ctx, "BEGIN; TRUNCATE sports, teams, events, markets, selections, scores, feed; "+diffFixture+" COMMIT"); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// diffFailure is a divergence: what (a fixed text) in view, then the details.
type diffFailure struct {
	what, view, detail string
}

func (d *diffFailure) Error() string { return d.detail }

// execBatch runs the batch's transactions, each statement in a savepoint.
func (r *diffRig) execBatch(ctx context.Context, b diffBatch) error {
	r.stats.mu.Lock()
	r.stats.batches++
	r.stats.txns += len(b.txns)
	r.stats.mu.Unlock()
	if b.burst {
		return r.execBurst(ctx, b)
	}
	logs := make([][]string, len(b.txns))
	if !b.concurrent || len(b.txns) < 2 {
		for i, txn := range b.txns {
			var err error
			if logs[i], err = r.execTxn(ctx, r.e.db, txn); err != nil {
				r.logBuf = append(r.logBuf, slices.Concat(logs...)...)
				return err
			}
		}
	} else {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for c := range 2 {
			wg.Go(func() {
				for i := c; i < len(b.txns); i += 2 {
					var err error
					if logs[i], err = r.execTxn(ctx, r.conns[c], b.txns[i]); err != nil {
						errs[c] = err
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			r.logBuf = append(r.logBuf, slices.Concat(logs...)...)
			return err
		}
		for i := range logs {
			if len(logs[i]) > 0 {
				logs[i][0] += fmt.Sprintf(" [connection %d]", i%2+1)
			}
		}
	}
	r.logBuf = append(r.logBuf, slices.Concat(logs...)...)
	return nil
}

// diffFeedBump is what every burst transaction does besides its statement.
const diffFeedBump = "UPDATE feed SET seq = seq + 1"

// execBurst commits the burst's one-statement transactions in one round trip per
// connection while the gate holds the replication stream: released, they are a backlog,
// received while a cycle that shows them all reads the first ones. Each in a DO block
// whose exception handler is the statement's savepoint (an error rolls back only it), and
// without waiting for its WAL flush (the burst is quicker). Each also
// bumps the feed: pgoutput sends no transaction that changed nothing, and many of the
// statements fail or find no row.
func (r *diffRig) execBurst(ctx context.Context, b diffBatch) error {
	conns := []*pgx.Conn{r.e.db}
	if b.concurrent {
		conns = r.conns[:]
	}
	logs := make([][]string, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for c, conn := range conns {
		var sql strings.Builder
		logs[c] = []string{fmt.Sprintf("  burst on connection %d: one round trip, each statement in its own transaction with %s, its error ignored:", c+1, diffFeedBump)}
		n := 0
		for i := c; i < len(b.txns); i += len(conns) {
			stmt := b.txns[i].stmts[0]
			fmt.Fprintf(&sql, "BEGIN; SET LOCAL synchronous_commit = off; DO $$BEGIN %s; EXCEPTION WHEN OTHERS THEN NULL; END$$; %s; COMMIT;\n", stmt, diffFeedBump)
			logs[c] = append(logs[c], "    "+stmt+";")
			n++
		}
		wg.Go(func() { _, errs[c] = conn.Exec(ctx, sql.String()) })
		r.stats.mu.Lock()
		r.stats.stmts += n
		r.stats.mu.Unlock()
	}
	r.gate.Hold()
	wg.Wait()
	r.gate.Release()
	r.logBuf = append(r.logBuf, slices.Concat(logs...)...)
	return errors.Join(errs...)
}

func (r *diffRig) execTxn(ctx context.Context, c *pgx.Conn, txn diffTxn) ([]string, error) {
	out := []string{"  BEGIN"}
	tx, err := c.Begin(ctx)
	if err != nil {
		return out, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	failed := 0
	for _, s := range txn.stmts {
		sp, err := tx.Begin(ctx) // a savepoint
		if err != nil {
			return out, err
		}
		tag, err := sp.Exec(ctx, s)
		if err != nil {
			failed++
			msg := err.Error()
			if i := strings.Index(msg, " (SQLSTATE"); i > 0 {
				msg = msg[:i]
			}
			out = append(out, fmt.Sprintf("    %s; -- rolled back: %s", s, msg))
			if err := sp.Rollback(ctx); err != nil {
				return out, err
			}
			continue
		}
		out = append(out, fmt.Sprintf("    %s; -- %d row(s)", s, tag.RowsAffected()))
		if err := sp.Commit(ctx); err != nil {
			return out, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return out, err
	}
	// The commit order, which two connections at once leave to PostgreSQL.
	out = append(out, fmt.Sprintf("  COMMIT -- #%d", r.commits.Add(1)))
	r.stats.mu.Lock()
	r.stats.stmts += len(txn.stmts)
	r.stats.failedStmts += failed
	r.stats.mu.Unlock()
	return out, nil
}

// compare waits until the stream's position passes the last commit, then compares every
// view's cache with its SQL.
func (r *diffRig) compare(ctx context.Context, what string) error {
	diffs, err := r.divergences(ctx, what)
	if err != nil {
		return err
	}
	var first string
	var all []string
	for _, v := range r.views {
		if d, ok := diffs[v.Name]; ok {
			if first == "" {
				first = v.Name
			}
			all = append(all, d)
		}
	}
	if len(all) > 0 {
		return &diffFailure{what: "the cache differs from the view's SQL", view: first,
			detail: fmt.Sprintf("after %s (position %s), the cache differs from the SQL:\n%s", what, r.cache.pos, strings.Join(all, "\n"))}
	}
	return nil
}

// divergences waits until the stream's position passes the last commit, then compares
// every view's cache with its SQL: view → what differs, for the views that differ.
func (r *diffRig) divergences(ctx context.Context, what string) (map[string]string, error) {
	var s string
	if err := r.e.db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return nil, err
	}
	target, err := capture.ParseLSN(s)
	if err != nil {
		return nil, err
	}
	if err := r.cache.waitPosition(ctx, target); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	tx, err := r.e.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	diffs := map[string]string{}
	for i := range r.views {
		v := &r.views[i]
		want, err := r.sqlRows(ctx, tx, i)
		if err != nil {
			return nil, err
		}
		if d := diffRows(r.cache.rows[v.Name], want); d != "" {
			diffs[v.Name] = fmt.Sprintf("view %s: %s\n%s  mapping:\n    %s", v.Name, v.SQL, d, strings.Join(r.deps[v.Name], "\n    "))
		}
	}
	r.stats.mu.Lock()
	r.stats.comparisons += len(r.views)
	r.stats.mu.Unlock()
	return diffs, nil
}

// sqlRows runs the i-th view's SQL in tx and encodes its rows with the distributor's row
// codec (key → value bytes), as its full reads do. The encoder is compiled once: the
// schema does not change during a run.
func (r *diffRig) sqlRows(ctx context.Context, tx pgx.Tx, i int) (map[string]string, error) {
	v := &r.views[i]
	if r.encs[i] == nil {
		enc, err := compileEncoder(ctx, tx, v, v.SQL)
		if err != nil {
			return nil, err
		}
		r.encs[i] = enc
	}
	codec := newRowCodec(v, r.encs[i], 0, 0)
	rows, err := tx.Query(ctx, v.SQL, pgjson.ResultFormats)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", v.Name, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		key, value, err := codec.encode(rows.RawValues())
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("view %s: key %s twice: the corpus's key is not unique", v.Name, key)
		}
		out[key] = string(value)
	}
	return out, rows.Err()
}

// diffRows lists the keys whose rows differ ("" when none).
func diffRows(cache, sql map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(cache) {
		if w, ok := sql[k]; !ok {
			fmt.Fprintf(&b, "  %s: cache %s, SQL none\n", k, cache[k])
		} else if w != cache[k] {
			fmt.Fprintf(&b, "  %s: cache %s, SQL %s\n", k, cache[k], w)
		}
	}
	for _, k := range sortedKeys(sql) {
		if _, ok := cache[k]; !ok {
			fmt.Fprintf(&b, "  %s: cache none, SQL %s\n", k, sql[k])
		}
	}
	return b.String()
}

// reconcileAll has the distributor re-read every view in full and checks that the
// epochs published no row: only their begin and end records.
func (r *diffRig) reconcileAll(ctx context.Context, what string) error {
	from := r.cache.next
	errs := make([]error, len(r.views))
	var wg sync.WaitGroup
	for i, v := range r.views {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := r.d.Reconcile(rctx, v.Name); err != nil {
				errs[i] = fmt.Errorf("reconcile %s: %w", v.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.stats.mu.Lock()
	r.stats.reconciles += len(r.views)
	r.stats.mu.Unlock()
	// Every reconcile's epoch is published when Reconcile returns: read to the topic's end.
	before := map[string]map[string]string{}
	for _, v := range r.views {
		before[v.Name] = maps.Clone(r.cache.rows[v.Name])
	}
	recs, err := r.cache.read(ctx)
	if err != nil {
		return err
	}
	var bad []string
	first := ""
	ends := map[string]int{}
	for _, rc := range recs {
		if rc.offset < from {
			continue
		}
		switch rc.meta.Kind {
		case record.KindRow:
			if first == "" {
				first = rc.meta.View
			}
			old, had := before[rc.meta.View][rc.key]
			switch {
			case rc.value == nil:
				bad = append(bad, fmt.Sprintf("  %s: tombstone (the cache had %s)", rc.key, old))
			case had:
				bad = append(bad, fmt.Sprintf("  %s: %s (the cache had %s)", rc.key, rc.value, old))
			default:
				bad = append(bad, fmt.Sprintf("  %s: %s (not in the cache)", rc.key, rc.value))
			}
		case record.KindEpochEnd:
			ends[rc.meta.View]++
		}
	}
	if len(bad) > 0 {
		return &diffFailure{what: "a reconcile corrected the incremental path", view: first,
			detail: fmt.Sprintf("after %s, a whole-view re-read (reconcile) published rows:\n%s", what, strings.Join(bad, "\n"))}
	}
	for _, v := range r.views {
		if ends[v.Name] == 0 {
			return fmt.Errorf("after %s: no epoch-end of %s after its reconcile returned", what, v.Name)
		}
	}
	return nil
}

// diffCache is the topic read as a consumer reads it: from where it stopped, source
// transactions applied at their position records.
type diffCache struct {
	client  sarama.Client
	topic   string
	next    int64                        // the next offset to read
	rows    map[string]map[string]string // view → key → value
	pending []rec                        // the current source transaction
	pos     capture.LSN                  // the last position record's
	at      capture.LSN                  // the position every view reflects: pos, or the earliest view behind it
	stale   []string
	// bad is the first inconsistency of the stream itself (an epoch-end that does not
	// describe the cache, a position that goes back).
	bad   error
	count int64
}

func newDiffCache(client sarama.Client, topic string) *diffCache {
	return &diffCache{client: client, topic: topic, rows: map[string]map[string]string{}}
}

// read reads the records committed since the last read and applies them; it returns
// them.
func (c *diffCache) read(ctx context.Context) ([]rec, error) {
	// As readAll: a transaction acknowledged to the producer may still be above the last
	// stable offset for an instant; wait (bounded) until the LSO passes the high-water
	// mark seen now.
	hw, err := c.client.GetOffset(c.topic, 0, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	var end int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, end, err = kafkaconn.CommittedOffsets(c.client, c.topic, 0); err != nil {
			return nil, err
		}
		if end >= hw || time.Now().After(deadline) {
			break
		}
	}
	var out []rec
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = kafkaconn.ReadCommitted(rctx, c.client, c.topic, 0, c.next, end, func(m *sarama.ConsumerMessage) error {
		meta, err := recordsarama.Meta(m)
		if err != nil {
			return fmt.Errorf("offset %d: %w", m.Offset, err)
		}
		var v []byte
		if m.Value != nil {
			v = append([]byte{}, m.Value...)
		}
		r := rec{offset: m.Offset, key: string(m.Key), value: v, meta: meta}
		out = append(out, r)
		c.apply(r)
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("reading %s from %d: %w", c.topic, c.next, err)
	}
	c.next = max(c.next, end)
	c.count += int64(len(out))
	return out, c.bad
}

func (c *diffCache) apply(r rec) {
	if r.meta.Kind != record.KindPosition {
		if r.meta.Txn {
			c.pending = append(c.pending, r)
		} else {
			c.applyOne(r)
		}
		return
	}
	var ends []rec
	for _, p := range c.pending {
		c.applyOne(p)
		if p.meta.Kind == record.KindEpochEnd {
			ends = append(ends, p)
		}
	}
	c.pending = c.pending[:0]
	// An epoch-end describes the whole view as of its snapshot: the cache, once the
	// source transaction is applied.
	for _, r := range ends {
		e, err := record.ParseEpochEnd(r.value)
		if err != nil {
			c.fail(fmt.Errorf("offset %d: %w", r.offset, err))
			continue
		}
		var sum record.EpochHash
		for k, v := range c.rows[r.meta.View] {
			sum.Add(record.RowHash([]byte(k), []byte(v)))
		}
		if sum.Rows() != e.Rows || sum.Sum() != e.Hash {
			c.fail(&diffFailure{what: "an epoch-end does not describe the cache", view: r.meta.View, detail: fmt.Sprintf("offset %d: epoch-end %d of %s says %d rows, hash %s; the cache holds %d rows, hash %s",
				r.offset, e.Epoch, r.meta.View, e.Rows, record.FormatHash(e.Hash), sum.Rows(), record.FormatHash(sum.Sum()))})
		}
	}
	p, err := record.ParsePosition(r.value)
	if err != nil {
		c.fail(fmt.Errorf("offset %d: %w", r.offset, err))
		return
	}
	l, err := capture.ParseLSN(p.LSN)
	if err != nil {
		c.fail(fmt.Errorf("offset %d: position %q: %w", r.offset, p.LSN, err))
		return
	}
	if l < c.pos {
		c.fail(fmt.Errorf("offset %d: position %s went back from %s", r.offset, l, c.pos))
	}
	c.pos, c.at, c.stale = l, l, p.Stale
	for v, b := range p.Behind {
		bl, err := capture.ParseLSN(b)
		if err != nil {
			c.fail(fmt.Errorf("offset %d: view %s behind at %q: %w", r.offset, v, b, err))
			return
		}
		if bl > l {
			c.fail(fmt.Errorf("offset %d: view %s behind at %s, ahead of the stream's %s", r.offset, v, bl, l))
		}
		c.at = min(c.at, bl)
	}
}

func (c *diffCache) applyOne(r rec) {
	if r.meta.Kind != record.KindRow {
		return
	}
	m := c.rows[r.meta.View]
	if m == nil {
		m = map[string]string{}
		c.rows[r.meta.View] = m
	}
	if r.value == nil {
		delete(m, r.key)
	} else {
		m[r.key] = string(r.value)
	}
}

func (c *diffCache) fail(err error) {
	if c.bad == nil {
		c.bad = err
	}
}

// waitPosition reads until a position record says every view reflects pos (the stream's
// position and that of each view behind it; bounded), as a client's WaitFor does.
func (c *diffCache) waitPosition(ctx context.Context, pos capture.LSN) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.read(ctx); err != nil {
			return err
		}
		if c.at >= pos {
			if len(c.stale) > 0 {
				return fmt.Errorf("position %s: views stopped (stale): %v", c.pos, c.stale)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no position record reached %s within a minute (last %s)", pos, c.pos)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
