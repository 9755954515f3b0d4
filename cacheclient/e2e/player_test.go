package e2e

import (
	"fmt"
	"testing"

	"github.com/statecast/statecast/cacheclient"
)

func ids(es []event) map[int64]bool {
	m := map[int64]bool{}
	for _, e := range es {
		m[e.ID] = true
	}
	return m
}

// TestPlayerSnapshotLiveAndIndexes: bootstrap from the player's snapshot, then live
// updates and deletes reach the view and its index; an epoch-end check passes.
func TestPlayerSnapshotLiveAndIndexes(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 20 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, []string{"soccer", "tennis"}[i%2])})
	}
	e.put("other", [2]string{"x", `{"id":1}`}) // a view the client does not subscribe to
	addr, _ := startPlayer(t, e)
	var cnt counting
	c, v := newClient(t, []string{addr}, "", cnt.hooks())
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitReady(t, c)
	if !equalView(v, e.wantOf("events")) {
		t.Fatalf("after snapshot: len %d", v.Len())
	}
	if got := len(v.ByIndex("sport", "soccer")); got != 10 {
		t.Fatalf("soccer %d", got)
	}
	e.put("events", [2]string{"0", ev(0, "golf")}, [2]string{"2", ""}, [2]string{"100", ev(100, "golf")})
	last := e.epochEnd("events", 0)
	eventually(t, "live changes", func() bool { return c.Position() >= last })
	if !equalView(v, e.wantOf("events")) {
		t.Fatal("live changes not applied")
	}
	golf := ids(v.ByIndex("sport", "golf"))
	if len(golf) != 2 || !golf[0] || !golf[100] {
		t.Fatalf("golf %v", golf)
	}
	if ids(v.ByIndex("sport", "soccer"))[2] || ids(v.ByIndex("sport", "soccer"))[0] {
		t.Fatal("deleted or moved keys still indexed under soccer")
	}
	if st := c.Stats(); st.EpochChecks != 1 || st.EpochMismatches != 0 {
		t.Fatalf("epoch checks %d mismatches %d", st.EpochChecks, st.EpochMismatches)
	}
	// The player's head_index reached the client: caught up, it lags by nothing.
	if st := c.Stats(); st.Head < last || st.LagEntries != 0 {
		t.Fatalf("caught up at %d: head %d, lag %d entries", st.Position, st.Head, st.LagEntries)
	}
}

// TestPlayerEpochMismatchResyncs: an epoch-end that disagrees with the view triggers a
// fresh snapshot.
func TestPlayerEpochMismatchResyncs(t *testing.T) {
	e := newKafkaEnv(t)
	e.put("events", [2]string{"1", ev(1, "a")})
	addr, _ := startPlayer(t, e)
	var cnt counting
	c, v := newClient(t, []string{addr}, "", cnt.hooks())
	c.Start()
	defer c.Close()
	waitReady(t, c)
	e.epochEnd("events", 1)
	eventually(t, "a second snapshot", func() bool { cnt.mu.Lock(); defer cnt.mu.Unlock(); return cnt.snapshots == 2 })
	if st := c.Stats(); st.EpochMismatches != 1 || v.Len() != 1 {
		t.Fatalf("mismatches %d len %d", st.EpochMismatches, v.Len())
	}
}

// TestPlayerRestartFromStateDir: a restart with StateDir resumes from the saved index:
// the player sends no snapshot, only the records written meanwhile.
func TestPlayerRestartFromStateDir(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 50 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, "a")})
	}
	addr, _ := startPlayer(t, e)
	dir := t.TempDir()
	var first counting
	c, _ := newClient(t, []string{addr}, dir, first.hooks())
	c.Start()
	waitReady(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	last := e.put("events", [2]string{"1", ev(1, "b")}, [2]string{"2", ""}, [2]string{"60", ev(60, "b")})
	var second counting
	c2, v2 := newClient(t, []string{addr}, dir, second.hooks())
	c2.Start()
	defer c2.Close()
	waitReady(t, c2)
	eventually(t, "resumed changes", func() bool { return c2.Position() >= last })
	if !equalView(v2, e.wantOf("events")) {
		t.Fatalf("after restart: len %d", v2.Len())
	}
	second.mu.Lock()
	defer second.mu.Unlock()
	if second.snapshots != 0 || second.entries != 3 || len(second.connects) == 0 || !second.connects[0] {
		t.Fatalf("restart received snapshots=%d entries=%d connects=%v; want a resume with the 3 new records only",
			second.snapshots, second.entries, second.connects)
	}
}

// TestPlayerFailover: two players; the first stops; the client resumes on the second from
// its index and keeps converging.
func TestPlayerFailover(t *testing.T) {
	e := newKafkaEnv(t)
	e.put("events", [2]string{"1", ev(1, "a")})
	addrA, stopA := startPlayer(t, e)
	addrB, _ := startPlayer(t, e)
	var cnt counting
	c, v := newClient(t, []string{addrA, addrB}, "", cnt.hooks())
	c.Start()
	defer c.Close()
	waitReady(t, c)
	stopA()
	var last int64
	for i := range 30 {
		last = e.put("events", [2]string{fmt.Sprint(i), ev(i, "b")})
	}
	eventually(t, "converged after failover", func() bool { return c.Position() >= last })
	if !equalView(v, e.wantOf("events")) {
		t.Fatal("view differs after failover")
	}
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	if cnt.snapshots != 1 || len(cnt.connects) < 2 || !cnt.connects[len(cnt.connects)-1] {
		t.Fatalf("snapshots %d connects %v: want one snapshot and a resumed reconnect", cnt.snapshots, cnt.connects)
	}
}

var _ = cacheclient.OpCreate
