package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault kinds, as the summary counts them.
const (
	KindKill         = "kill"          // SIGKILL of a process, started again after a while
	KindPause        = "pause"         // SIGSTOP, SIGCONT after more than the player's ack timeout
	KindReset        = "reset"         // every connection of a hop reset (RST)
	KindBlackhole    = "blackhole"     // a hop stops forwarding without closing, then heals
	KindPGRestart    = "pg-restart"    // PostgreSQL stopped (fast, or immediate: a crash) and started
	KindKafkaRestart = "kafka-restart" // the broker stopped (gracefully, or SIGKILL) and started
	KindLockLoss     = "lock-loss"     // the active distributor's lock session ends while its Kafka hop is a black hole
	// Broker faults, on a cluster of broker nodes (Config.KafkaNodes > 1) only.
	KindBrokerKill  = "broker-kill"  // one broker node SIGKILLed, started again after a while
	KindLeaderKill  = "leader-kill"  // the stream partition's leader SIGKILLed while a transaction is open, started again
	KindBrokerPause = "broker-pause" // one broker node SIGSTOPped past its session timeout, then SIGCONT
	KindBrokerWipe  = "broker-wipe"  // one broker node killed, its data directory lost, started again empty
)

// brokerKinds are the broker faults.
var brokerKinds = []string{KindBrokerKill, KindLeaderKill, KindBrokerPause, KindBrokerWipe}

// brokerSession is the cluster's broker.session.timeout.ms (deploy/local/kafka-cluster.sh):
// a broker paused longer is fenced by the controllers and loses its leaderships.
const brokerSession = 6 * time.Second

// fault is one planned fault. The whole plan is drawn from the seed before the run starts,
// so a seed replays the same faults in the same order (their timing against the workload
// still varies).
type fault struct {
	Gap  time.Duration // wait before it, after the previous one healed
	Kind string
	// Target is a process or a hop ("kafka/player-1"), resolved when the fault starts
	// where it names a role: "active" and "standby" are the distributors holding and
	// waiting for the lock then ("pg/active": the active one's PostgreSQL hop), and a
	// client's player hop is the one it uses then ("client-1" in a reset or black hole).
	// Empty for the servers; "broker-<node>" for a broker fault's node, "leader" for the
	// stream partition's leader then.
	Target string
	Hold   time.Duration // how long it lasts: down time, pause, black hole
	Crash  bool          // pg-restart, kafka-restart: a crash instead of a clean stop
}

func (f fault) String() string {
	s := f.Kind
	if f.Target != "" {
		s += " " + f.Target
	}
	if f.Crash {
		s += " (crash)"
	}
	if f.Hold > 0 {
		s += fmt.Sprintf(" for %v", f.Hold.Round(100*time.Millisecond))
	}
	return s
}

// topology names what faults can hit.
type topology struct {
	players, clients []string
	ackTimeout       time.Duration
	brokers          int // broker nodes: more than one adds the broker faults
}

// plan draws n faults (at least one of every kind on every class of target: 17, and on a
// cluster one of each broker fault: 21) whose holds and gaps fill about d.
func plan(seed uint64, d time.Duration, n int, topo topology) []fault {
	r := rand.New(rand.NewPCG(seed, 0x6368616f73))
	role := func() string { // mostly the active distributor: the standby only waits
		if r.IntN(4) == 0 {
			return "standby"
		}
		return "active"
	}
	procs := func(class int) []string {
		return [][]string{{role()}, topo.players, topo.clients}[class]
	}
	// The hops: distributor⇄PostgreSQL, distributor⇄Kafka, player⇄Kafka, client⇄player.
	hopClasses := []string{"pg", "kafka-dist", "kafka-player", "player"}
	draw := func(kind string, class int) fault {
		f := fault{Kind: kind}
		switch kind {
		case KindKill:
			f.Target = pick(r, procs(class))
			f.Hold = time.Duration(200+r.IntN(2800)) * time.Millisecond
		case KindPause:
			f.Target = pick(r, procs(class))
			f.Hold = topo.ackTimeout + time.Duration(1000+r.IntN(3000))*time.Millisecond
		case KindReset, KindBlackhole:
			switch hopClasses[class] {
			case "pg":
				f.Target = "pg/" + role()
			case "kafka-dist":
				f.Target = "kafka/" + role()
			case "kafka-player":
				f.Target = "kafka/" + pick(r, topo.players)
			case "player":
				f.Target = pick(r, topo.clients)
			}
			if kind == KindBlackhole {
				f.Hold = time.Duration(2000+r.IntN(8000)) * time.Millisecond
			}
		case KindPGRestart, KindKafkaRestart:
			f.Crash = r.IntN(2) == 0
		case KindLockLoss:
			f.Hold = time.Duration(2000+r.IntN(4000)) * time.Millisecond
		case KindBrokerKill, KindBrokerWipe:
			f.Target = fmt.Sprintf("broker-%d", 1+r.IntN(max(topo.brokers, 1)))
			f.Hold = time.Duration(1000+r.IntN(5000)) * time.Millisecond
		case KindLeaderKill:
			f.Target = "leader"
			f.Hold = time.Duration(1000+r.IntN(5000)) * time.Millisecond
		case KindBrokerPause:
			f.Target = fmt.Sprintf("broker-%d", 1+r.IntN(max(topo.brokers, 1)))
			f.Hold = brokerSession + time.Duration(2000+r.IntN(4000))*time.Millisecond
		}
		return f
	}
	var fs []fault
	for class := range 3 {
		fs = append(fs, draw(KindKill, class), draw(KindPause, class))
	}
	for class := range hopClasses {
		fs = append(fs, draw(KindReset, class), draw(KindBlackhole, class))
	}
	fs = append(fs, draw(KindPGRestart, 0), draw(KindKafkaRestart, 0), draw(KindLockLoss, 0))
	cluster := topo.brokers > 1
	if cluster {
		for _, k := range brokerKinds {
			fs = append(fs, draw(k, 0))
		}
	}
	r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	// More faults, weighted towards the frequent real ones (process deaths, network).
	weights := []struct {
		kind    string
		classes int
		w       int
	}{{KindKill, 3, 6}, {KindPause, 3, 3}, {KindReset, 4, 5}, {KindBlackhole, 4, 4},
		{KindPGRestart, 1, 1}, {KindKafkaRestart, 1, 1}, {KindLockLoss, 1, 1}}
	if cluster {
		weights = append(weights, []struct {
			kind    string
			classes int
			w       int
		}{{KindBrokerKill, 1, 2}, {KindLeaderKill, 1, 2}, {KindBrokerPause, 1, 1}, {KindBrokerWipe, 1, 1}}...)
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	for len(fs) < n {
		x := r.IntN(total)
		for _, w := range weights {
			if x < w.w {
				fs = append(fs, draw(w.kind, r.IntN(w.classes)))
				break
			}
			x -= w.w
		}
	}
	// Gaps: what d leaves after the holds (and an estimate of the servers' restarts),
	// spread at random, at least half a second each.
	busy := time.Duration(0)
	for _, f := range fs {
		busy += f.Hold
		switch f.Kind {
		case KindKafkaRestart:
			busy += 20 * time.Second * time.Duration(max(topo.brokers, 1))
		case KindBrokerKill, KindLeaderKill, KindBrokerPause:
			busy += 20 * time.Second // a start, and the wait for the ISR to be whole again
		case KindBrokerWipe:
			busy += 30 * time.Second
		case KindPGRestart:
			busy += 3 * time.Second
		case KindLockLoss:
			busy += 5 * time.Second
		}
	}
	left := max(d-busy, 0)
	for i := range fs {
		share := time.Duration(0)
		if left > 0 {
			share = time.Duration(r.Int64N(int64(2*left/time.Duration(len(fs))) + 1))
		}
		fs[i].Gap = 500*time.Millisecond + share
	}
	return fs
}
