package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/internal/faultproxy"
	"github.com/statecast/statecast/kafkaconn"
)

// Config of a run. Zero values take the defaults.
type Config struct {
	// Seed draws the fault plan and the workload; 0 draws one from the clock. The run
	// prints it: the same seed replays the same plan.
	Seed uint64
	// Duration is about how long the faults last (default 2m).
	Duration time.Duration
	// Changes is the number of source row changes to make at least (default 5000): the
	// writers pace themselves to make them within Duration, and go on after the faults
	// when they are behind.
	Changes int64
	// Faults is the number of faults (default: one per 8 s of Duration, at least 17: one
	// of each kind on each class of target; 21 on a cluster, with the broker faults).
	Faults int
	// Writers and Clients: writer goroutines and client processes (defaults 3 and 4).
	Writers, Clients int
	// KafkaNodes is the number of Kafka broker nodes (default 1: deploy/local/kafka.sh's
	// single broker). More starts a KRaft cluster (deploy/local/kafka-cluster.sh) on which
	// the stream has replication factor 3 (at most the nodes) and min.insync.replicas=2
	// (from 3 nodes), and adds the broker faults to the plan.
	KafkaNodes int
	// Dir keeps the run's binaries, configs, logs and state; default a new temporary
	// directory, removed after a run without violations.
	Dir string
	// Repo is the module's root (default: found above the working directory).
	Repo string
	// Race builds the processes with the race detector (a race is then a violation).
	Race bool
	// PlayerRSS and ClientRSS are the memory budgets (resident set) of a player and of a
	// client process; defaults DefaultPlayerRSS and DefaultClientRSS (four times that with
	// Race).
	PlayerRSS, ClientRSS int64
	// ConvergeTimeout bounds the wait for every client to reflect the last write after the
	// faults (default 3m).
	ConvergeTimeout time.Duration
	// Log receives the run's progress lines (default: discarded).
	Log io.Writer
}

// Default memory budgets. A player holds the materialized copy of the stream (a few
// thousand rows here), its history (history_bytes) and the targets' queues
// (target_budget_bytes each); a client holds its views twice at most (a snapshot being
// built beside the live version) plus the raw values kept for its state file.
const (
	DefaultPlayerRSS = 256 << 20
	DefaultClientRSS = 160 << 20
)

// The players' settings that the faults play against.
const (
	ackTimeout   = 3 * time.Second
	historyBytes = 4 << 20
	targetBudget = 4 << 20
	streamName   = "chaos"
)

func (c *Config) defaults() error {
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Changes <= 0 {
		c.Changes = 5000
	}
	if c.Faults <= 0 {
		least := 17
		if c.KafkaNodes > 1 {
			least += len(brokerKinds)
		}
		c.Faults = max(least, int(c.Duration/(8*time.Second)))
	}
	if c.Writers <= 0 {
		c.Writers = 3
	}
	if c.Clients <= 0 {
		c.Clients = 4
	}
	if c.KafkaNodes <= 0 {
		c.KafkaNodes = 1
	}
	mul := int64(1)
	if c.Race {
		mul = 4
	}
	if c.PlayerRSS <= 0 {
		c.PlayerRSS = DefaultPlayerRSS * mul
	}
	if c.ClientRSS <= 0 {
		c.ClientRSS = DefaultClientRSS * mul
	}
	if c.ConvergeTimeout <= 0 {
		c.ConvergeTimeout = 3 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Repo == "" {
		root, err := findRepo()
		if err != nil {
			return err
		}
		c.Repo = root
	}
	return nil
}

// Violation is one thing the run found wrong.
type Violation struct {
	Kind   string // view, read-your-writes, atomic, index, delivery/<guarantee>, crash, panic, memory, converge
	Where  string // the client or process
	View   string
	Key    string
	Want   string
	Got    string
	Detail string
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.Kind + ":")
	if v.Where != "" {
		b.WriteString(" " + v.Where)
	}
	if v.View != "" {
		b.WriteString(" view " + v.View)
	}
	if v.Key != "" {
		b.WriteString(" key " + v.Key)
	}
	switch {
	case v.Key != "": // a row: absent, or its canonical text
		fmt.Fprintf(&b, ": want %s, got %s", orNone(v.Want), orNone(v.Got))
	case v.Want != "" || v.Got != "":
		fmt.Fprintf(&b, ": want %s, got %s", v.Want, v.Got)
	}
	if v.Detail != "" {
		b.WriteString(": " + v.Detail)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(no row)"
	}
	return "{" + s + "}"
}

// Result is what a run found.
type Result struct {
	Seed       uint64
	Changes    int64 // source row changes committed
	Txns       int64
	Faults     map[string]int // by kind
	Violations []Violation
	// Converge is the time from the end of the last fault until every client reflected
	// the last write (-1: some never did). The writers go on after the faults until they
	// made Changes, so ConvergeAfterWrites, the time from the writers' stop, is the lag
	// left at the end.
	Converge, ConvergeAfterWrites time.Duration
	// RYWChecks counts read-your-writes checks that compared (RYWSkipped: the client did
	// not answer in time, a fault in the way); AtomicChecks the Cuts whose sums were checked.
	RYWChecks, RYWSkipped, AtomicChecks int64
	// LeaderKillsInTxn counts the leader-kill faults that hit the leader while a transaction
	// of the stream was open (its last stable offset below its high watermark).
	LeaderKillsInTxn int
	MaxRSS           map[string]int64 // by process
	Dir              string           // kept when there are violations
}

// Summary is the run's one-line summary.
func (r *Result) Summary() string {
	kinds := []string{KindKill, KindPause, KindReset, KindBlackhole, KindPGRestart, KindKafkaRestart, KindLockLoss}
	for _, k := range brokerKinds {
		if r.Faults[k] > 0 {
			kinds = append(kinds, k)
		}
	}
	var fs []string
	n := 0
	for _, k := range kinds {
		if k == KindLeaderKill {
			fs = append(fs, fmt.Sprintf("%s %d (%d with a transaction open)", k, r.Faults[k], r.LeaderKillsInTxn))
			n += r.Faults[k]
			continue
		}
		fs = append(fs, fmt.Sprintf("%s %d", k, r.Faults[k]))
		n += r.Faults[k]
	}
	vk := map[string]int{}
	for _, v := range r.Violations {
		vk[v.Kind]++
	}
	var vs []string
	for k, c := range vk {
		vs = append(vs, fmt.Sprintf("%s %d", k, c))
	}
	slices.Sort(vs)
	conv := "never"
	if r.Converge >= 0 {
		conv = fmt.Sprintf("%v after the last fault (%v after the last write)",
			r.Converge.Round(100*time.Millisecond), r.ConvergeAfterWrites.Round(100*time.Millisecond))
	}
	viol := fmt.Sprint(len(r.Violations))
	if len(vs) > 0 {
		viol += " (" + strings.Join(vs, ", ") + ")"
	}
	return fmt.Sprintf("chaos: seed %d, %d changes in %d transactions, %d faults (%s), %d read-your-writes checks (%d skipped), %d atomicity checks, violations %s, converged %s",
		r.Seed, r.Changes, r.Txns, n, strings.Join(fs, ", "), r.RYWChecks, r.RYWSkipped, r.AtomicChecks, viol, conv)
}

type run struct {
	cfg   Config
	start time.Time
	dir   string

	pg    *pgServer
	kafka *kafkaServer
	dbDSN string // the run's database, direct
	pool  *pgxpool.Pool

	procs   map[string]*proc
	dists   []*proc
	players []*proc
	clients []*proc
	proxies map[string]*faultproxy.Proxy
	http    map[string]string // distributor, player, client → its HTTP address
	views   map[string][]string
	sums    []int64

	mu         sync.Mutex
	violations []Violation
	faults     map[string]int
	// lockLosses are the lock-loss faults' windows, from the black hole to a few seconds
	// after the heal: a stale record read in one is the old active's (stale).
	lockLosses []window
	ws         writerStats
	httpc      *http.Client
	ports      ports
	tap        *tap
	tapCtx     context.Context
	stopTap    context.CancelFunc
	atomics    []atomicCase
	// leaderKillsInTxn: leader-kill faults that found a transaction open.
	leaderKillsInTxn int
}

// atomicCase is a Cut whose sums were wrong, explained at the end (with the tap).
type atomicCase struct {
	client string
	pos    int64
	got    []int64
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, "chaos %7.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *run) violate(v Violation) {
	r.mu.Lock()
	r.violations = append(r.violations, v)
	r.mu.Unlock()
	r.logf("VIOLATION %s", v)
}

// Run runs the chaos run of cfg and returns what it found. An error means the run could
// not be made (a build, a server that did not start); what it found wrong is in
// Result.Violations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, start: time.Now(), procs: map[string]*proc{}, proxies: map[string]*faultproxy.Proxy{}, http: map[string]string{},
		views: map[string][]string{}, faults: map[string]int{}, httpc: &http.Client{Timeout: 10 * time.Second}}
	r.tapCtx, r.stopTap = context.WithCancel(context.Background())
	target := "chaos"
	if cfg.KafkaNodes > 1 {
		target = fmt.Sprintf("chaos-cluster KAFKA_NODES=%d", cfg.KafkaNodes)
	}
	r.logf("seed %d (replay: make %s SEED=%d DURATION=%v CHANGES=%d)", cfg.Seed, target, cfg.Seed, cfg.Duration, cfg.Changes)
	r.dir = cfg.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "statecast-chaos-")
		if err != nil {
			return nil, err
		}
		r.dir = d
	}
	res := &Result{Seed: cfg.Seed, Faults: r.faults, MaxRSS: map[string]int64{}, Converge: -1}
	err := r.run(ctx, res)
	r.teardown()
	res.Violations = r.violations
	res.Changes, res.Txns = r.ws.changes.Load(), r.ws.txns.Load()
	res.RYWChecks, res.RYWSkipped, res.AtomicChecks = r.ws.rywChecks.Load(), r.ws.rywSkipped.Load(), r.ws.atomicChecks.Load()
	res.LeaderKillsInTxn = r.leaderKillsInTxn
	for name, p := range r.procs {
		res.MaxRSS[name] = p.maxRSS
	}
	if err == nil && len(res.Violations) == 0 && cfg.Dir == "" {
		_ = os.RemoveAll(r.dir)
	} else {
		res.Dir = r.dir
	}
	return res, err
}

func (r *run) run(ctx context.Context, res *Result) error {
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.setup(ctx); err != nil {
		return err
	}
	topo := r.topology()
	faults := plan(r.cfg.Seed, r.cfg.Duration, r.cfg.Faults, topo)
	r.logf("plan: %d faults", len(faults))

	// The workload, the atomicity probe and the memory sampler run through the faults.
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var wg sync.WaitGroup
	rate := float64(r.cfg.Changes) / r.cfg.Duration.Seconds() / float64(r.cfg.Writers)
	for w := range r.cfg.Writers {
		wg.Go(func() { r.writer(wctx, w, rate) })
	}
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	var probes sync.WaitGroup
	probes.Go(func() { r.atomicProbe(pctx) })
	probes.Go(func() { r.sampleMemory(pctx) })

	for i, f := range faults {
		if !sleep(ctx, f.Gap) {
			return ctx.Err()
		}
		r.logf("fault %d/%d: %s", i+1, len(faults), f)
		if err := r.inject(ctx, f); err != nil {
			r.logf("fault %s: %v", f, err)
		}
		r.mu.Lock()
		r.faults[f.Kind]++
		r.mu.Unlock()
	}
	r.healAll(ctx)
	lastHeal := time.Now()
	r.logf("faults over; %d changes so far", r.ws.changes.Load())
	for r.ws.changes.Load() < r.cfg.Changes && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	stopWriters()
	wg.Wait()
	writersStopped := time.Now()
	r.logf("writers stopped: %d changes in %d transactions (%d failed attempts)", r.ws.changes.Load(), r.ws.txns.Load(), r.ws.errors.Load())

	// Converged: every client reflects the last commit, then equals the views' SQL.
	conv, err := r.converge(ctx, lastHeal)
	if err != nil {
		return err
	}
	res.Converge = conv
	if conv >= 0 {
		res.ConvergeAfterWrites = max(conv-writersStopped.Sub(lastHeal), 0)
	}
	if err := r.compareViews(ctx); err != nil {
		return err
	}
	for _, p := range r.clients {
		if st, err := r.clientState(p.name); err == nil {
			s := st.Stats
			r.logf("%s: %d reconnects, %d resyncs, %d snapshots, %d epoch checks (%d mismatches), %d entries applied",
				p.name, s.Reconnects, s.Resyncs, s.SnapshotsApplied, s.EpochChecks, s.EpochMismatches, s.EntriesApplied)
			if s.EpochMismatches > 0 {
				// An epoch-end hash that disagrees with the client's rows means the stream
				// and the distributor's content parted: a record lost, or a stale one that
				// landed after the distributor moved on (a second writer after a lock loss).
				r.violate(Violation{Kind: "epoch-mismatch", Where: p.name, Detail: fmt.Sprintf(
					"%d of %d epoch-end checks disagreed with the client's rows (each one resyncs it)", s.EpochMismatches, s.EpochChecks)})
			}
		}
	}
	stopProbes()
	probes.Wait()
	for _, a := range r.atomics {
		r.violate(Violation{Kind: "atomic", Where: a.client, View: "accounts", Want: fmt.Sprint(r.sums), Got: fmt.Sprint(a.got),
			Detail: fmt.Sprintf("the sums of the writers' balances in one Cut (position %d) changed: part of a transaction is visible, or a wrong row; %s",
				a.pos, r.tap.explainSums(a.pos, r.cfg.Writers, r.sums))})
	}
	if stale, n, at := r.tap.stale(maxListed); n > 0 {
		why := "a second writer of the stream, or a reordering"
		r.mu.Lock()
		for _, w := range r.lockLosses {
			if !at[0].Before(w.from) && !at[1].After(w.to) {
				why = fmt.Sprintf("they landed after the lock-loss fault of %s: %s's records in flight reached Kafka after %s had taken over "+
					"(split brain after a lock loss: a former active is not fenced on the Kafka side)",
					w.from.Format("15:04:05.000"), w.old, w.next)
			}
		}
		r.mu.Unlock()
		r.violate(Violation{Kind: "stale-record", Detail: fmt.Sprintf("%d row records in the stream, read from %s to %s, carry an older version of their row than an earlier record of their key (an old row landed after a newer one; %s):\n      %s",
			n, at[0].Format("15:04:05.000"), at[1].Format("15:04:05.000"), why, strings.Join(stale, "\n      "))})
	}
	if sums, err := partitionSums(ctx, r.pool, r.cfg.Writers); err == nil && !slices.Equal(sums, r.sums) {
		return fmt.Errorf("chaos: the workload changed the writers' sums in PostgreSQL (%v, not %v): the atomicity probe is void", sums, r.sums)
	}
	// Delivery: with the distributors stopped the stream ends; once every client caught up
	// with its end, what each received is checked against the topic.
	if err := r.checkDelivery(ctx); err != nil {
		return err
	}
	r.checkProcesses()
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *run) topology() topology {
	t := topology{ackTimeout: ackTimeout, brokers: r.cfg.KafkaNodes}
	for _, p := range r.players {
		t.players = append(t.players, p.name)
	}
	for _, p := range r.clients {
		t.clients = append(t.clients, p.name)
	}
	return t
}

// resolve turns a fault's target into what it hits now: the distributor of a role, the
// player hops a client uses (its proxies with live connections; all of them when none has
// one), a process or a hop by name.
func (r *run) resolve(f fault) []string {
	name := f.Target
	hop, role, isHop := strings.Cut(name, "/")
	if !isHop {
		role, hop = name, ""
	}
	if role == "active" || role == "standby" {
		var act, stb []string
		for _, p := range r.dists {
			if r.distActive(p.name) {
				act = append(act, p.name)
			} else {
				stb = append(stb, p.name)
			}
		}
		pool := act
		if role == "standby" || len(act) == 0 {
			pool = append(stb, act...)
		}
		if len(pool) == 0 {
			return nil
		}
		role = pool[0]
	}
	if hop != "" {
		return []string{hop + "/" + role}
	}
	if strings.HasPrefix(role, "client-") && (f.Kind == KindReset || f.Kind == KindBlackhole) {
		var live, all []string
		for _, p := range r.players {
			h := p.name + "/" + role
			all = append(all, h)
			if r.proxies[h].Links() > 0 {
				live = append(live, h)
			}
		}
		if len(live) > 0 {
			return live
		}
		return all
	}
	return []string{role}
}

func (r *run) waitFor(ctx context.Context, d time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s: not after %v", what, d)
		}
		if name := r.crashLooping(); name != "" {
			// A process that cannot stay up (a bad config, a crash at start-up) would
			// otherwise keep the run waiting until the deadline.
			return fmt.Errorf("chaos: %s: %s crashes again and again (%d times); its last crash: %s", what, name, crashLoop, r.procs[name].lastCrash())
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// crashLoop is the number of crashes in a row that make a process crash-looping.
const crashLoop = 10

// crashLooping names a process whose last crashLoop starts all ended in a crash.
func (r *run) crashLooping() string {
	for name, p := range r.procs {
		if p.crashLooping(crashLoop) {
			return name
		}
	}
	return ""
}

func (r *run) getJSON(addr, path string, out any) error {
	resp, err := r.httpc.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s%s: %s: %s", addr, path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (r *run) distActive(name string) bool {
	var h struct {
		Streams map[string]string `json:"streams"`
	}
	return r.getJSON(r.http[name], "/healthz", &h) == nil && h.Streams[streamName] == "active"
}

func (r *run) playerReady(name string) bool {
	var h struct {
		Streams map[string]string `json:"streams"`
	}
	return r.getJSON(r.http[name], "/healthz", &h) == nil && h.Streams[streamName] == "ready"
}

func (r *run) clientState(name string) (ClientState, error) {
	var st ClientState
	err := r.getJSON(r.http[name], "/state", &st)
	return st, err
}

// endOffset is the stream's committed end offset, its last stable offset (0 when
// unknown): a transaction still open (the first epoch, on a slow cluster) does not count,
// since the players read committed records only.
func (r *run) endOffset() int64 {
	cfg := kafkaconn.NewConfig("statecast-chaos")
	cl, err := sarama.NewClient(r.kafka.Brokers, cfg)
	if err != nil {
		return 0
	}
	defer cl.Close()
	b, err := cl.Leader(streamName, 0)
	if err != nil {
		return 0
	}
	n, err := listOffset(b, cfg.Version, sarama.ReadCommitted)
	if err != nil {
		return 0
	}
	return n
}

// healAll ends every fault still in effect: proxies forward, paused processes continue,
// stopped ones start.
func (r *run) healAll(ctx context.Context) {
	for _, p := range r.proxies {
		p.Heal()
	}
	for _, p := range r.procs {
		p.resume()
		if err := p.restart(); err != nil {
			r.logf("restart %s: %v", p.name, err)
		}
	}
	_ = r.pg.Start(ctx)
	for n := 1; n <= r.kafka.nodes; n++ {
		_ = r.kafka.ResumeNode(n) // a paused node (an error when it does not run)
	}
	_ = r.kafka.Start(ctx)
}

// teardown stops every process, proxy and server.
func (r *run) teardown() {
	r.stopTap()
	if r.tap != nil {
		<-r.tap.done
	}
	var wg sync.WaitGroup
	for _, p := range r.procs {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
	for _, p := range r.proxies {
		p.Close()
	}
	r.httpc.CloseIdleConnections()
	if r.pool != nil {
		r.pool.Close()
	}
	if r.kafka != nil {
		r.kafka.Stop()
	}
	if r.pg != nil {
		r.pg.Stop()
	}
}

// sampleMemory keeps each process's largest resident set.
func (r *run) sampleMemory(ctx context.Context) {
	for sleep(ctx, 500*time.Millisecond) {
		for _, p := range r.procs {
			p.sampleRSS()
		}
	}
}
