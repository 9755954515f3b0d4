package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestPlayerResyncBelowLogStart: a client restarts from a saved index that the log no
// longer holds (records deleted below it); the player requires a resync and the snapshot
// replaces the state: a key deleted meanwhile disappears, with a delete change.
func TestPlayerResyncBelowLogStart(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	e := newKafkaEnv(t)
	// DeleteRecords is refused on compact-only topics: use a topic with both policies.
	e.topic = testenv.NewTopic(t, "cacheclient-resync", map[string]string{"cleanup.policy": "compact,delete"})
	for i := range 10 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, "a")})
	}
	dir := t.TempDir()
	addr, stop := startPlayer(t, e)
	c, _ := newClient(t, []string{addr}, dir, cacheclient.Hooks{})
	c.Start()
	waitReady(t, c)
	saved := c.Position()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	stop()

	last := e.put("events", [2]string{"1", ""}, [2]string{"2", ev(2, "b")}, [2]string{"11", ev(11, "a")})
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("cacheclient-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteRecords(e.topic, map[int32]int64{0: last}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	admin.Close()

	addr2, _ := startPlayer(t, e)
	var mu sync.Mutex
	var resyncs []string
	deleted := map[string]bool{}
	c2, v2 := newClient(t, []string{addr2}, dir, cacheclient.Hooks{OnResync: func(r string) {
		mu.Lock()
		resyncs = append(resyncs, r)
		mu.Unlock()
	}})
	cacheclient.OnChange(v2, func(_ context.Context, ch cacheclient.Change[event]) error {
		if ch.Op == cacheclient.OpDelete {
			mu.Lock()
			deleted[ch.Key] = true
			mu.Unlock()
		}
		return nil
	}, cacheclient.WithInitialPass())
	c2.Start()
	defer c2.Close()
	waitReady(t, c2)
	eventually(t, "the snapshot after the resync", func() bool { return c2.Position() >= last })
	// The log now starts at the last record: the stream's state is that record only (the
	// player's snapshot holds what the log holds).
	if _, ok := v2.Get("11"); !ok || v2.Len() != 1 {
		t.Fatalf("after resync: len %d", v2.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resyncs) == 0 || !deleted["1"] {
		t.Fatalf("resyncs %v deleted %v (saved index %d, log start %d)", resyncs, deleted, saved, last)
	}
	t.Logf("resync reason %v", resyncs)
}
