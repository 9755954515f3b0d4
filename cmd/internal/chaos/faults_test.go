package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPlan: a plan holds every kind of fault on every class of target, and a seed draws
// the same plan again.
func TestPlan(t *testing.T) {
	topo := topology{players: []string{"player-1", "player-2"}, clients: []string{"client-0", "client-1"}, ackTimeout: 3 * time.Second}
	a := plan(42, time.Minute, 17, topo)
	if len(a) != 17 {
		t.Fatalf("%d faults, want 17", len(a))
	}
	seen := map[string]bool{}
	for _, f := range a {
		class := f.Target
		for _, p := range []string{"active", "standby", "player", "client", "pg/", "kafka/active", "kafka/standby", "kafka/player"} {
			if strings.HasPrefix(f.Target, p) {
				class = p
				break
			}
		}
		switch class {
		case "standby":
			class = "active"
		case "kafka/standby":
			class = "kafka/active"
		}
		seen[f.Kind+" "+class] = true
		if f.Kind == KindPause && f.Hold <= topo.ackTimeout {
			t.Errorf("%s: not longer than the ack timeout", f)
		}
	}
	if len(seen) != 17 {
		t.Errorf("%d distinct kinds and classes, want 17: %v", len(seen), seen)
	}
	b := plan(42, time.Minute, 17, topo)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("the same seed drew %v then %v", a[i], b[i])
		}
	}
	if c := plan(43, time.Minute, 17, topo); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Errorf("seeds 42 and 43 drew the same plan")
	}
	if n := len(plan(42, 10*time.Minute, 60, topo)); n != 60 {
		t.Errorf("%d faults, want 60", n)
	}
}

// TestPlanCluster: on a cluster of brokers a plan adds each broker fault once to the 17, on
// a node of the cluster, a pause past the brokers' session timeout; and it draws more of
// them among the extra faults. A single broker's plan has none.
func TestPlanCluster(t *testing.T) {
	topo := topology{players: []string{"player-1", "player-2"}, clients: []string{"client-0", "client-1"}, ackTimeout: 3 * time.Second, brokers: 3}
	a := plan(42, time.Minute, 21, topo)
	count := map[string]int{}
	for _, f := range a {
		count[f.Kind]++
		switch f.Kind {
		case KindBrokerKill, KindBrokerPause, KindBrokerWipe:
			if f.Target != "broker-1" && f.Target != "broker-2" && f.Target != "broker-3" {
				t.Errorf("%s: not a node of the cluster", f)
			}
		case KindLeaderKill:
			if f.Target != "leader" {
				t.Errorf("%s: not aimed at the leader", f)
			}
		}
		if f.Kind == KindBrokerPause && f.Hold <= brokerSession {
			t.Errorf("%s: not longer than the brokers' session timeout %v", f, brokerSession)
		}
	}
	for _, k := range brokerKinds {
		if count[k] != 1 {
			t.Errorf("%d %s faults in the least plan, want 1", count[k], k)
		}
	}
	if len(a) != 21 {
		t.Errorf("%d faults, want 21", len(a))
	}
	broker := 0
	for _, f := range plan(42, 10*time.Minute, 60, topo) {
		if slices.Contains(brokerKinds, f.Kind) {
			broker++
		}
	}
	if broker < 6 {
		t.Errorf("%d broker faults among 60, want more than the 4 of the least plan", broker)
	}
	topo.brokers = 1
	for _, f := range plan(42, 10*time.Minute, 60, topo) {
		if slices.Contains(brokerKinds, f.Kind) {
			t.Errorf("a single broker's plan holds %s", f)
		}
	}
}
