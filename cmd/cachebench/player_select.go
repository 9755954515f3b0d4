package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
	"github.com/statecast/statecast/schemas/wire"
)

// runPlayerSelect: a view of R rows, row r owned by tenant r mod T; T targets each
// selecting its tenant's rows (k == "t<i>"), against U targets that take the whole view,
// at C changes/s (each change rewrites a random row, same tenant). The player runs alone
// in a child process, so that its CPU time and live heap are its own. Reported per phase:
// lag produce → applied, the player's CPU per change; for the filtered targets, the memory
// they add to the player, per target, beyond their queues: live heap and goroutine stacks.
func runPlayerSelect(ctx context.Context, args *bench.Args, w io.Writer) error {
	targets := args.Int("targets", 10000, "filtered targets (one tenant each)")
	rows := args.Int("rows", 1_000_000, "rows of the view")
	rate := args.Int("rate", 10000, "changes per second")
	whole := args.Int("baseline-targets", 100, "unfiltered targets of the baseline phase")
	baseRate := args.Int("baseline-rate", 0, "the baseline's changes per second (0: -rate)")
	size := args.Int("size", 200, "row size in bytes")
	dur := args.Duration("duration", 15*time.Second, "measured time per phase")
	warm := args.Duration("warmup", 3*time.Second, "warm-up per phase (not measured)")
	conns := args.Int("conns", 100, "client connections carrying the targets")
	many := args.Bool("many", true, "the filtered targets (and the memory baseline's) are channels of one SubscribeMany stream per connection; false: a Subscribe stream each")
	bs, err := args.Parse()
	if err != nil {
		return err
	}
	if *baseRate == 0 {
		*baseRate = *rate
	}
	fmt.Fprintf(w, "player-select: a view of %d rows (row r: tenant t<r mod %d>, %d B), %d targets each selecting one tenant (k == \"t<i>\") at %d changes/s; baseline: %d targets of the whole view at %d changes/s; %s measured after %s per phase\n",
		*rows, *targets, *size, *targets, *rate, *whole, *baseRate, *dur, *warm)
	fmt.Fprintf(w, "the player runs alone in a child process (its CPU time and live heap are its own); the producer and the receivers (gRPC streams acking each frame) in this one (%s)\n", bench.Layout())
	topic, drop, err := bench.NewTopic(bs, "bench_select")
	if err != nil {
		return err
	}
	defer drop()
	tenant := func(r int) string { return "t" + strconv.Itoa(r%*targets) }
	msgs := make([]*sarama.ProducerMessage, *rows)
	meta := record.Meta{Kind: record.KindRow, View: "rows", Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/0"}
	for r := range *rows {
		msgs[r] = recordsarama.ProducerMessage(topic, record.EncodeKey("rows", strconv.Itoa(r)), bench.PayloadWith(*size, time.Now(), tenant(r)), meta)
	}
	took, err := bench.ProduceSync(bs, msgs, 10000)
	if err != nil {
		return err
	}
	msgs = nil
	fmt.Fprintf(w, "view loaded: %d rows in %.1f s\n", *rows, took.Seconds())
	start := time.Now()
	pl, err := bench.StartChildPlayer(ctx, bs, topic, 0, *targets+*whole)
	if err != nil {
		return err
	}
	defer pl.Stop()
	fmt.Fprintf(w, "player ready (its copy of the view read) in %.1f s\n", time.Since(start).Seconds())

	transport := "a Subscribe stream each"
	if *many {
		transport = "channels of one SubscribeMany stream per connection"
	}
	fmt.Fprintf(w, "filtered targets: %s, over %d connections; the baseline's targets: a Subscribe stream each\n", transport, *conns)
	plain, err := admitOnly(ctx, w, bs, topic, pl, fmt.Sprintf("memory baseline: %d targets of another view, which never changes (no selection)", *targets), *targets, *conns, *many,
		func(i int, id string, resume int64) *statecastv1.Hello {
			return &statecastv1.Hello{ClientId: id, Stream: topic, Views: []string{"idle"}, ProtocolVersion: 1, ResumeIndex: &resume}
		})
	if err != nil {
		return err
	}
	base, err := selectPhase(ctx, w, bs, topic, pl, selectRun{name: fmt.Sprintf("baseline: %d targets, whole view", *whole),
		n: *whole, conns: min(*conns, *whole), rate: *baseRate, rows: *rows, size: *size, dur: *dur, warm: *warm, tenant: tenant, seed: 1,
		hello: func(i int, id string, resume int64) *statecastv1.Hello {
			return &statecastv1.Hello{ClientId: id, Stream: topic, Views: []string{"rows"}, ProtocolVersion: 1, ResumeIndex: &resume}
		},
		targetOf: func(int) int { return -1 }})
	if err != nil {
		return err
	}
	sel, err := selectPhase(ctx, w, bs, topic, pl, selectRun{name: fmt.Sprintf("selected: %d targets, one tenant each", *targets),
		n: *targets, conns: *conns, many: *many, rate: *rate, rows: *rows, size: *size, dur: *dur, warm: *warm, tenant: tenant, seed: 2,
		hello: func(i int, id string, resume int64) *statecastv1.Hello {
			return &statecastv1.Hello{ClientId: id, Stream: topic, Views: []string{"rows"}, ProtocolVersion: wire.ProtocolVersion, ResumeIndex: &resume,
				Selections: []*statecastv1.Selection{{View: "rows", Filter: `k == "t` + strconv.Itoa(i) + `"`}}}
		},
		targetOf: func(r int) int { return r % *targets }})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ngoal selected lag p99 <= 100 ms: %s ms  %s\n", bench.MS(sel.lag.P99), metIf(sel.lag.P99 <= 100*time.Millisecond))
	fmt.Fprintf(w, "goal player memory per selected target beyond its queue <= 2048 B: %d B (heap %d + stacks %d)  %s (a target without a selection: %d B; the selection: %d B)\n",
		sel.perTarget.total(), sel.perTarget.heap, sel.perTarget.stacks, metIf(sel.perTarget.total() <= 2048), plain.total(), sel.perTarget.total()-plain.total())
	ratio := float64(sel.cpuPerChange) / float64(base.cpuPerChange)
	fmt.Fprintf(w, "goal player CPU per change, selected <= 2 x the baseline's (%.1f µs): %.1f µs = %.2f x  %s\n",
		float64(base.cpuPerChange.Nanoseconds())/1e3, float64(sel.cpuPerChange.Nanoseconds())/1e3, ratio, metIf(ratio <= 2))
	return nil
}

// selectRun is one phase of player-select.
type selectRun struct {
	name             string
	n, conns, rate   int
	many             bool // targets are channels of SubscribeMany streams
	rows, size, seed int
	dur, warm        time.Duration
	tenant           func(row int) string
	hello            func(i int, id string, resume int64) *statecastv1.Hello // resume: the index the target has
	targetOf         func(row int) int                                       // the target of row's changes, -1: every target
}

type selectResult struct {
	lag          bench.Summary
	cpuPerChange time.Duration
	perTarget    targetMem       // per target beyond the queues
	delay        bench.DelayHist // the player's dispatch → written, over the measured window
}

func selectPhase(ctx context.Context, w io.Writer, bs []string, topic string, pl *bench.ChildPlayer, run selectRun) (selectResult, error) {
	var res selectResult
	fmt.Fprintf(w, "\n%s\n", run.name)
	rs, end, per, err := admit(ctx, w, bs, topic, pl, run.n, run.conns, run.many, run.hello)
	if err != nil {
		return res, err
	}
	defer rs.close()
	res.perTarget = per
	p, err := bench.NewProducer(bs, topic)
	if err != nil {
		return res, err
	}
	total := int(float64(run.rate) * (run.dur + run.warm).Seconds())
	warmN := int(float64(run.rate) * run.warm.Seconds())
	want := make([]int, run.n)
	rng := rand.New(rand.NewPCG(uint64(run.seed), 7))
	var cpu0 time.Duration
	var delay0 bench.DelayHist
	bench.Pace(ctx, run.rate, func(i int) bool {
		if i >= total {
			return false
		}
		if i == warmN {
			cpu0, _ = pl.CPU(ctx)
			delay0, _ = pl.Delay(ctx)
		}
		r := rng.IntN(run.rows)
		if t := run.targetOf(r); t >= 0 {
			want[t]++
		} else {
			for t := range want {
				want[t]++
			}
		}
		p.SendRow("rows", strconv.Itoa(r), bench.PayloadWith(run.size, time.Now(), run.tenant(r)))
		return true
	})
	if err := p.Close(); err != nil {
		return res, err
	}
	ok := bench.WaitFor(2*time.Minute, func() bool {
		for t, r := range rs.Recv {
			if r.Count() < want[t] {
				return false
			}
		}
		return true
	})
	cpu1, err := pl.CPU(ctx)
	if err != nil {
		return res, err
	}
	delay1, err := pl.Delay(ctx)
	if err != nil {
		return res, err
	}
	res.delay = delay1.Since(delay0)
	if !ok {
		return res, fmt.Errorf("%s: the targets did not get all their changes within 2 minutes", run.name)
	}
	st, _, _ := bench.Latencies(rs.Recv, end+int64(warmN), nil)
	res.lag = bench.Summarize(st)
	measured := total - warmN
	res.cpuPerChange = (cpu1 - cpu0) / time.Duration(measured)
	deliveries := 0
	for _, r := range rs.Recv {
		deliveries += r.Count()
	}
	fmt.Fprintf(w, "  %d changes at %d/s, %d deliveries\n", total, run.rate, deliveries)
	fmt.Fprintf(w, "  lag produce→applied  %s\n", res.lag)
	fmt.Fprintf(w, "  of which in the player, dispatch→written (its delivery_delay histogram's buckets): %s\n", res.delay)
	fmt.Fprintf(w, "  player CPU: %.2f s over the %d measured changes and their wait = %.1f µs per change (%.0f %% of a core at %d changes/s)\n",
		(cpu1 - cpu0).Seconds(), measured, float64(res.cpuPerChange.Nanoseconds())/1e3,
		100*res.cpuPerChange.Seconds()*float64(run.rate), run.rate)
	return res, nil
}

func metIf(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

// targetMem is the memory targets add to the player, per target: live heap beyond their
// queues, and goroutine stacks.
type targetMem struct{ heap, stacks int64 }

func (m targetMem) total() int64 { return m.heap + m.stacks }

// admitOnly connects n targets, reports the memory they add to the player per target
// beyond their queues, and disconnects them.
func admitOnly(ctx context.Context, w io.Writer, bs []string, topic string, pl *bench.ChildPlayer, name string, n, conns int, many bool,
	hello func(i int, id string, resume int64) *statecastv1.Hello) (targetMem, error) {
	fmt.Fprintf(w, "\n%s\n", name)
	rs, _, per, err := admit(ctx, w, bs, topic, pl, n, conns, many, hello)
	if err != nil {
		return targetMem{}, err
	}
	rs.close()
	return per, nil
}

// admitted are the receivers of a phase, admitted by the player.
type admitted struct {
	*bench.Receivers
	pl  *bench.ChildPlayer
	ctx context.Context
}

// close ends the receivers and waits until the player has let their targets go.
func (a admitted) close() {
	a.Close()
	bench.WaitFor(time.Minute, func() bool { n, err := a.pl.Targets(a.ctx); return err == nil && n == 0 })
}

// admit connects n receivers resuming at the end of the log (end: the log's end before
// them: they start live, at the head, without a snapshot of the view), waits until the
// player admitted them all, and returns with the memory they added to the player per
// target beyond their queues.
func admit(ctx context.Context, w io.Writer, bs []string, topic string, pl *bench.ChildPlayer, n, conns int, many bool,
	hello func(i int, id string, resume int64) *statecastv1.Hello) (a admitted, end int64, perTarget targetMem, err error) {
	before, err := pl.Stat(ctx)
	if err != nil {
		return a, 0, perTarget, err
	}
	if end, err = bench.EndOffset(bs, topic); err != nil {
		return a, 0, perTarget, err
	}
	start := time.Now()
	connect := bench.ConnectReceivers
	if many {
		connect = bench.ConnectManyReceivers
	}
	rs, err := connect(pl.Addr, n, conns, func(i int, id string) *statecastv1.Hello { return hello(i, id, end-1) })
	if err != nil {
		return a, 0, perTarget, err
	}
	a = admitted{Receivers: rs, pl: pl, ctx: ctx}
	got := 0
	if !bench.WaitFor(3*time.Minute, func() bool {
		got, err = pl.Targets(ctx)
		return err == nil && got >= n
	}) {
		a.close()
		return a, 0, perTarget, fmt.Errorf("%d targets not admitted within 3 minutes (%d)", n, got)
	}
	st, err := pl.Stat(ctx)
	if err != nil {
		a.close()
		return a, 0, perTarget, err
	}
	perTarget = targetMem{heap: (st.Live - before.Live - st.QueueBytes) / int64(n), stacks: (st.Stacks - before.Stacks) / int64(n)}
	fmt.Fprintf(w, "  admitted in %.1f s; the player's live heap %.1f -> %.1f MB (queues %d B), its goroutines %d -> %d and their stacks %.1f -> %.1f MB: %d B per target beyond its queue (heap %d + stacks %d)\n",
		time.Since(start).Seconds(), float64(before.Live)/1e6, float64(st.Live)/1e6, st.QueueBytes, before.Goroutines, st.Goroutines, float64(before.Stacks)/1e6, float64(st.Stacks)/1e6,
		perTarget.total(), perTarget.heap, perTarget.stacks)
	return a, end, perTarget, nil
}
