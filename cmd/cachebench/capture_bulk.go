package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
)

const bulkSchema = `
CREATE TABLE bulk_parents (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE bulk_rows (id bigint PRIMARY KEY, parent_id int NOT NULL REFERENCES bulk_parents, v bigint NOT NULL, pad text NOT NULL);
CREATE INDEX ON bulk_rows (parent_id);
`

// The two views of capture-bulk: the table as it is, and the table joined to its parents
// (the parent's name is in every row; the parents' key is not selected, so a rename
// reaches the rows through the children's parent_id).
var (
	bulkRowsView   = distributor.ViewConfig{Name: "rows", SQL: "SELECT id, v, pad FROM bulk_rows", Key: []string{"id"}}
	bulkJoinedView = distributor.ViewConfig{Name: "joined", SQL: `SELECT c.id, c.v, c.pad, p.name AS parent
		FROM bulk_rows c JOIN bulk_parents p ON p.id = c.parent_id`, Key: []string{"id"}}
)

// productionMemLimit and productionGOMEMLIMIT are the production overlay's
// (deploy/kubernetes/overlays/production/distributor.yaml).
const (
	productionMemLimit   = 768 << 20
	productionGOMEMLIMIT = "691MiB"
)

// runCaptureBulk measures source transactions that change many rows at once: one UPDATE
// of every row of a table, and, through a join, a parent renamed and its children moved to
// another parent; each against the start-up snapshot of the same view in the same run.
// The distributor runs alone in a child process, whose memory is measured per phase.
func runCaptureBulk(ctx context.Context, args *bench.Args, w io.Writer) error {
	rows := args.Int("rows", 1_000_000, "rows in the table")
	children := args.Int("children", 100_000, "children per parent (the join view's fan-out)")
	pad := args.Int("pad", 110, "bytes of padding per row (110: rows of about 150 B)")
	memLimit := args.String("gomemlimit", productionGOMEMLIMIT, "the distributor's GOMEMLIMIT (the production overlay's; \"\" for none)")
	distCPU := args.String("dist-cpuprofile", "", "write the distributor's CPU profile of each phase to this file + .rows / .joined")
	distMem := args.String("dist-memprofile", "", "write the distributor's allocation profile of each phase to this file + .rows / .joined")
	skipJoin := args.Bool("skip-join", false, "run only the single-table phase")
	share := args.Float64("share", 1, "the share of the rows the single-table phase's UPDATE changes")
	o := captureFlags(args)
	env, err := bench.NewDistEnv(ctx, args, bulkSchema)
	if err != nil {
		return err
	}
	defer env.Close()
	if *rows < 1 || *children < 1 || *children > *rows || *share <= 0 || *share > 1 {
		return errors.New("-rows and -children must be at least 1, -children at most -rows, -share in (0, 1]")
	}
	parents := (*rows + *children - 1) / *children
	if parents < 2 {
		return errors.New("-rows must be at least twice -children (a parent's children move to another)")
	}
	fmt.Fprintf(w, "capture-bulk: loading %d rows (%d parents of %d children)...\n", *rows, parents, *children)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO bulk_parents SELECT p, 'parent ' || p FROM generate_series(1, $1::int) p", []any{parents}},
		{`INSERT INTO bulk_rows SELECT i, (i - 1) / $2::int + 1, 0, left(repeat(md5(i::text), 8), $3::int)
			FROM generate_series(1, $1::bigint) i`, []any{*rows, *children, *pad}},
		{"VACUUM ANALYZE", nil},
	} {
		if _, err := env.Conn.Exec(ctx, q.sql, q.args...); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "distributor: a child process (GOMEMLIMIT=%s), alone; player and cacheclient in this process; limit judged: %s (the production overlay's)\n",
		orNone(*memLimit), bench.MiB(productionMemLimit))
	fmt.Fprintln(w, "time = just before COMMIT was sent -> (kafka) the topic's last stable offset passed the position record after the transaction, (cache) cacheclient WaitFor returned")
	fmt.Fprintln(w, "whole = a Cut sampled continuously while the cache applies shows the transaction's rows all old or all new")
	fmt.Fprintln(w)

	var goals []func()
	peak := int64(0)
	prof := func(f, phase string) string {
		if f == "" {
			return ""
		}
		return f + "." + phase
	}

	// Phase 1: the single-table view; every row updated in one transaction.
	ph, err := startBulkPhase(ctx, w, env, o, bulkRowsView, bench.ChildOptions{MemLimit: *memLimit, CPUProfile: prof(*distCPU, "rows"), MemProfile: prof(*distMem, "rows")}, *rows, bench.VersionDecoder)
	if err != nil {
		return err
	}
	changed := int(*share * float64(*rows))
	res, err := ph.run(ctx, w, fmt.Sprintf("UPDATE bulk_rows SET v = v + 1 WHERE id <= %d (%.0f%% of the rows)", changed, 100**share),
		fmt.Sprintf("UPDATE bulk_rows SET v = v + 1 WHERE id <= %d", changed), changed,
		func(key string, v int64) int {
			if id, _ := strconv.Atoi(key); id > changed {
				return -1
			}
			if v == 0 || v == 1 {
				return int(v) // before, after
			}
			return 2
		})
	ph.close()
	if err != nil {
		return err
	}
	peak = max(peak, ph.snapMem.PeakRSS, res.mem.PeakRSS)
	snap1 := ph.snapshot
	goals = append(goals, func() {
		goalAtMostOf(w, fmt.Sprintf("UPDATE of %d rows, commit -> published in Kafka", changed), "2 x snapshot "+bench.MS(snap1)+" ms", res.kafka, 2*snap1)
		fmt.Fprintf(w, "  (commit -> cache whole %s ms = %.2f x snapshot)\n", bench.MS(res.cache), bench.Ratio(res.cache, snap1))
	})

	if !*skipJoin {
		// Phase 2: the join view; parent 1 renamed, then its children moved to parent 2.
		dec := func(_ string, value []byte) (int64, error) { return parentVersion(value) }
		ph, err := startBulkPhase(ctx, w, env, o, bulkJoinedView, bench.ChildOptions{MemLimit: *memLimit, CPUProfile: prof(*distCPU, "joined"), MemProfile: prof(*distMem, "joined")}, *rows, dec)
		if err != nil {
			return err
		}
		of1 := func(key string) bool { id, _ := strconv.Atoi(key); return id <= *children }
		r1, err := ph.run(ctx, w, fmt.Sprintf("rename parent 1 (%d children)", *children), "UPDATE bulk_parents SET name = 'parent 1 #1' WHERE id = 1", *children,
			func(key string, v int64) int {
				switch {
				case !of1(key):
					return -1
				case v == 1_000_000:
					return 0
				case v == 1_000_001:
					return 1
				}
				return 2
			})
		if err == nil {
			peak = max(peak, ph.snapMem.PeakRSS, r1.mem.PeakRSS)
			var r2 bulkResult
			r2, err = ph.run(ctx, w, fmt.Sprintf("move parent 1's %d children to parent 2", *children), "UPDATE bulk_rows SET parent_id = 2 WHERE parent_id = 1", *children,
				func(key string, v int64) int {
					switch {
					case !of1(key):
						return -1
					case v == 1_000_001:
						return 0
					case v == 2_000_000:
						return 1
					}
					return 2
				})
			if err == nil {
				peak = max(peak, r2.mem.PeakRSS)
				snap2 := ph.snapshot
				goals = append(goals, func() {
					goalAtMostOf(w, fmt.Sprintf("rename of a parent of %d children, commit -> published in Kafka", *children), "2 x snapshot "+bench.MS(snap2)+" ms", r1.kafka, 2*snap2)
					fmt.Fprintf(w, "  (commit -> cache whole %s ms = %.2f x snapshot)\n", bench.MS(r1.cache), bench.Ratio(r1.cache, snap2))
					goalAtMostOf(w, fmt.Sprintf("move of %d children, commit -> published in Kafka", *children), "2 x snapshot "+bench.MS(snap2)+" ms", r2.kafka, 2*snap2)
					fmt.Fprintf(w, "  (commit -> cache whole %s ms = %.2f x snapshot)\n", bench.MS(r2.cache), bench.Ratio(r2.cache, snap2))
				})
			}
		}
		ph.close()
		if err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	for _, g := range goals {
		g()
	}
	by := ""
	if peak > productionMemLimit {
		by = fmt.Sprintf(" (over by %s)", bench.MiB(peak-productionMemLimit))
	}
	fmt.Fprintf(w, "goal distributor peak RSS <= %s: %s  %s%s\n", bench.MiB(productionMemLimit), bench.MiB(peak), bench.Verdict(peak <= productionMemLimit), by)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// bulkPhase is one view's distributor (a child process), player and cache.
type bulkPhase struct {
	env      *bench.DistEnv
	o        captureOpts
	view     string
	dist     *bench.ChildDistributor
	player   *bench.Player
	cache    *bench.Cache
	topic    string
	snapshot time.Duration
	snapMem  bench.Mem
	held     int64 // the distributor's live heap before a transaction
}

type bulkResult struct {
	kafka, cache time.Duration
	mem          bench.Mem
}

// startBulkPhase starts the distributor with view (its start-up snapshot is the phase's
// baseline), then a player and a cache of it.
func startBulkPhase(ctx context.Context, w io.Writer, env *bench.DistEnv, o captureOpts, view distributor.ViewConfig, co bench.ChildOptions,
	rows int, dec cacheclient.Decoder[int64]) (*bulkPhase, error) {
	ph := &bulkPhase{env: env, o: o, view: view.Name, topic: env.Topic("bench_bulk")}
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: env.DSN},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.Brokers, ClientID: "cachebench"}},
		Streams:  []distributor.StreamConfig{{Topic: ph.topic, Capture: distributor.CaptureWAL, Views: []distributor.ViewConfig{view}}},
	}
	var err error
	if *o.log {
		co.Log = "info"
		if *o.debug {
			co.Log = "debug"
		}
	}
	if ph.dist, err = bench.StartChildDistributor(ctx, cfg, co); err != nil {
		return nil, err
	}
	ph.snapshot = ph.dist.Ready
	if ph.snapMem, err = ph.dist.Mem(ctx); err != nil {
		ph.close()
		return nil, err
	}
	fmt.Fprintf(w, "view %s: %s\n", view.Name, strings.Join(strings.Fields(view.SQL), " "))
	fmt.Fprintf(w, "  baseline: start-up snapshot of %d rows (Run -> WaitReady)  %s ms\n", rows, bench.MS(ph.snapshot))
	fmt.Fprintf(w, "    distributor: peak RSS %s, peak heap %s, peak live heap %s; held after it: %s live = %.0f B per row\n",
		bench.MiB(ph.snapMem.PeakRSS), bench.MiB(ph.snapMem.PeakHeap), bench.MiB(ph.snapMem.PeakLive), bench.MiB(ph.snapMem.Live), float64(ph.snapMem.Live)/float64(rows))
	ph.held = ph.snapMem.Live
	if ph.player, err = bench.StartPlayer(env.Brokers, ph.topic, nil); err != nil {
		ph.close()
		return nil, err
	}
	if ph.cache, err = bench.StartCache(ctx, ph.player.Addr(), ph.topic, map[string]cacheclient.Decoder[int64]{view.Name: dec}); err != nil {
		ph.close()
		return nil, err
	}
	if n := ph.cache.View(view.Name).Len(); n != rows {
		ph.close()
		return nil, fmt.Errorf("the cache holds %d rows of %s after its snapshot, want %d", n, view.Name, rows)
	}
	return ph, nil
}

// run commits sql in one transaction and times it to Kafka and to the cache, while a
// sampler checks every Cut of the cache: class says of a row whether it is unaffected
// (-1), as before (0), as after (1) or neither (2, an error). want rows must end as after.
func (ph *bulkPhase) run(ctx context.Context, w io.Writer, what, sql string, want int, class func(key string, v int64) int) (bulkResult, error) {
	var res bulkResult
	before, err := ph.dist.Mem(ctx) // a new phase of the child's memory
	if err != nil {
		return res, err
	}
	ph.held = before.Live
	bench.ResetSelfHWM()
	watch, err := bench.WatchPositions(ph.env.Brokers, ph.topic)
	if err != nil {
		return res, err
	}
	defer watch.Close()
	tx, err := ph.env.Conn.Begin(ctx)
	if err != nil {
		return res, err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		_ = tx.Rollback(ctx)
		return res, err
	}
	view := ph.cache.View(ph.view)
	sampler := newCutSampler(ph.cache.Client, view, class)
	sent := time.Now()
	if err := tx.Commit(ctx); err != nil {
		sampler.stop()
		return res, err
	}
	committed := time.Since(sent)
	// The commit's position as a service reads it (docs/operations.md: after COMMIT, on
	// its connection): a position record at or past it follows the commit.
	var after string
	if err := ph.env.Conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&after); err != nil {
		sampler.stop()
		return res, err
	}
	lsn, err := cacheclient.ParseLSN(after)
	if err != nil {
		sampler.stop()
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, *ph.o.timeout)
	defer cancel()
	var kafkaAt time.Time
	var posAt int64
	var kerr error
	kdone := make(chan struct{})
	go func() {
		defer close(kdone)
		kafkaAt, posAt, kerr = watch.Wait(wctx, lsn)
	}()
	err = ph.cache.Client.WaitFor(wctx, cacheclient.LSN(lsn))
	cacheAt := time.Now()
	<-kdone
	s := sampler.stop()
	if err != nil {
		return res, fmt.Errorf("%s: cache: %w", what, err)
	}
	if kerr != nil {
		return res, fmt.Errorf("%s: kafka: %w", what, kerr)
	}
	res.kafka, res.cache = kafkaAt.Sub(sent), cacheAt.Sub(sent)
	if res.mem, err = ph.dist.Mem(ctx); err != nil {
		return res, err
	}
	final := checkCut(ph.cache.Client.Read(), view, class)
	hwm, _ := bench.SelfMem()
	fmt.Fprintf(w, "  %s:\n", what)
	fmt.Fprintf(w, "    COMMIT returned after %s ms; its position record at offset %d\n", bench.MS(committed), posAt)
	fmt.Fprintf(w, "    commit -> last record in Kafka  %s ms  (%.2f x snapshot)\n", bench.MS(res.kafka), bench.Ratio(res.kafka, ph.snapshot))
	fmt.Fprintf(w, "    commit -> cache shows it whole  %s ms  (%.2f x snapshot)\n", bench.MS(res.cache), bench.Ratio(res.cache, ph.snapshot))
	fmt.Fprintf(w, "    distributor: peak RSS %s, peak heap %s, peak live heap %s = held before + %.0f B per changed row\n",
		bench.MiB(res.mem.PeakRSS), bench.MiB(res.mem.PeakHeap), bench.MiB(res.mem.PeakLive), float64(res.mem.PeakLive-ph.held)/float64(want))
	fmt.Fprintf(w, "    player + cacheclient process: peak RSS %s (info)\n", bench.MiB(hwm))
	fmt.Fprintf(w, "    cuts sampled while it applied: %d (%d all old, %d all new, %d partial, %d with a row neither old nor new)\n",
		s.samples, s.old, s.new, s.partial, s.bad)
	if s.partial > 0 || s.bad > 0 {
		return res, fmt.Errorf("%s: a Cut showed part of the transaction", what)
	}
	if final.new != want || final.old != 0 {
		return res, fmt.Errorf("%s: after WaitFor the cache shows %d rows as after, %d as before, want %d after", what, final.new, final.old, want)
	}
	return res, nil
}

func (ph *bulkPhase) close() {
	if ph.cache != nil {
		ph.cache.Close()
	}
	if ph.player != nil {
		ph.player.Close()
	}
	if ph.dist != nil {
		_ = ph.dist.Stop()
		_ = bench.DropSlots(context.Background(), ph.env.Conn, ph.env.DB())
	}
}

// cutCount counts a Cut's rows by class.
type cutCount struct{ old, new, bad int }

func checkCut(cut *cacheclient.Cut, v *cacheclient.View[int64], class func(string, int64) int) cutCount {
	var c cutCount
	v.In(cut).Range(func(key string, val int64) bool {
		switch class(key, val) {
		case 0:
			c.old++
		case 1:
			c.new++
		case 2:
			c.bad++
		}
		return true
	})
	return c
}

type cutStats struct{ samples, old, new, partial, bad int }

type cutSampler struct {
	quit chan struct{}
	wg   sync.WaitGroup
	s    cutStats
}

// newCutSampler checks each new Cut of c until stop.
func newCutSampler(c *cacheclient.Client, v *cacheclient.View[int64], class func(string, int64) int) *cutSampler {
	cs := &cutSampler{quit: make(chan struct{})}
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		last := int64(-2)
		for {
			select {
			case <-cs.quit:
				return
			default:
			}
			cut := c.Read()
			if cut.Position() == last {
				time.Sleep(time.Millisecond)
				continue
			}
			last = cut.Position()
			n := checkCut(cut, v, class)
			cs.s.samples++
			switch {
			case n.bad > 0:
				cs.s.bad++
			case n.old > 0 && n.new > 0:
				cs.s.partial++
			case n.new > 0:
				cs.s.new++
			default:
				cs.s.old++
			}
		}
	}()
	return cs
}

func (cs *cutSampler) stop() cutStats {
	close(cs.quit)
	cs.wg.Wait()
	return cs.s
}

// parentVersion decodes a joined row into parent id × 1,000,000 + the rename its name
// shows ("parent 1 #1": 1,000,001; never renamed: 1,000,000).
func parentVersion(value []byte) (int64, error) {
	var row struct {
		Parent string `json:"parent"`
	}
	if err := gojson.Unmarshal(value, &row); err != nil {
		return 0, err
	}
	name, ver, _ := strings.Cut(strings.TrimPrefix(row.Parent, "parent "), " #")
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parent %q: %w", row.Parent, err)
	}
	v := int64(0)
	if ver != "" {
		if v, err = strconv.ParseInt(ver, 10, 64); err != nil {
			return 0, err
		}
	}
	return id*1_000_000 + v, nil
}
