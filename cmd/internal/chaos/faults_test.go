package chaos

import (
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
