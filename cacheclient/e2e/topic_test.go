package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
)

// TestTopicRecreatedUnderPipeline: the stream's topic is deleted and created again under a
// running PostgreSQL → distributor (wal) → Kafka → player → cacheclient pipeline, then rows
// change, so that the new topic soon holds more records than the old one: a client's old
// index is a valid offset of the new topic. The distributor must republish every view into
// the new topic (not go on from its in-memory hashes), and no client may resume at an
// offset of the old topic — neither the connected one nor one restarted from its state
// file: both must end up equal to the database, row by row.
func TestTopicRecreatedUnderPipeline(t *testing.T) {
	p := startWALPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A second client with a state file, stopped before the topic goes away.
	dir := t.TempDir()
	var mu sync.Mutex
	var resyncs []string
	hooks := cacheclient.Hooks{OnResync: func(r string) { mu.Lock(); resyncs = append(resyncs, r); mu.Unlock() }}
	saved, _, _ := accountsClient(t, p.addr, dir, "saved", hooks)
	waitReady(t, saved)
	oldIndex := saved.Position()
	if err := saved.Close(); err != nil {
		t.Fatal(err)
	}

	recreate(t, p.kafka)
	// A few rows change at once, one transaction each: their records are early in the new
	// topic, at offsets a client's old index is above. The other rows reach the new topic
	// only through the distributor's republication.
	for id := 1; id <= 10; id++ {
		if _, err := p.pool.Exec(ctx, fmt.Sprintf("UPDATE accounts SET balance = balance + %d WHERE id = %d", 1000*id, id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.pool.Exec(ctx, "UPDATE marks SET v = 4242 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	want := p.dbAccounts(t, ctx)

	equal := func(c *cacheclient.Client, low, high *cacheclient.View[account]) bool {
		got := map[int]int64{}
		cut := c.Read()
		for _, v := range []*cacheclient.View[account]{low, high} {
			v.In(cut).Range(func(_ string, a account) bool { got[a.ID] = a.Balance; return true })
		}
		if len(got) != len(want) {
			return false
		}
		for id, b := range want {
			if got[id] != b {
				return false
			}
		}
		return true
	}
	eventually3(t, "the connected client equal to the database", func() bool { return equal(p.client, p.low, p.high) })
	if m, ok := p.marks.Get(cacheclient.Key("1")); !ok || m.Balance != 4242 {
		eventually3(t, "the connected client's marks", func() bool { m, ok := p.marks.Get(cacheclient.Key("1")); return ok && m.Balance == 4242 })
	}

	restarted, low, high := accountsClient(t, p.addr, dir, "saved", hooks)
	waitReady(t, restarted)
	eventually3(t, "the restarted client equal to the database", func() bool { return equal(restarted, low, high) })
	mu.Lock()
	got := append([]string(nil), resyncs...)
	mu.Unlock()
	if len(got) == 0 || got[0] != "REASON_TOPIC_CHANGED" {
		t.Errorf("the restarted client's resyncs: %v (it resumed from %d of the old topic)", got, oldIndex)
	}

	// The distributor republished every view into the new topic.
	recs, err := checker.ReadTopic(ctx, p.kafka.brokers, p.kafka.topic)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int{}
	rows := map[string]bool{}
	for _, r := range recs {
		switch r.Kind {
		case "epoch-end":
			ends[r.View]++
		case "row":
			rows[r.Key] = !r.Tombstone
		}
	}
	live := 0
	for _, ok := range rows {
		if ok {
			live++
		}
	}
	if ends["low"] == 0 || ends["high"] == 0 || ends["marks"] == 0 || live != nAccounts+1 {
		t.Errorf("the new topic holds epoch-ends %v and %d live rows, want an epoch of every view and %d rows", ends, live, nAccounts+1)
	}
	if first := recs[0].Index; first > oldIndex {
		t.Logf("note: the new topic starts at %d, above the old index %d", first, oldIndex)
	}
}

// dbAccounts reads id → balance from the database.
func (p *walPipeline) dbAccounts(t *testing.T, ctx context.Context) map[int]int64 {
	t.Helper()
	rows, err := p.pool.Query(ctx, "SELECT id, balance FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var id int
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// accountsClient starts a client of the low and high views with a state directory.
func accountsClient(t *testing.T, addr, dir, id string, h cacheclient.Hooks) (*cacheclient.Client, *cacheclient.View[account], *cacheclient.View[account]) {
	t.Helper()
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "s", Service: id, StateDir: dir,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}, cacheclient.WithHooks(h))
	if err != nil {
		t.Fatal(err)
	}
	low, err := cacheclient.Register(c, "low", decodeAccount)
	if err != nil {
		t.Fatal(err)
	}
	high, err := cacheclient.Register(c, "high", decodeAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, low, high
}

// recreate deletes e's topic and creates it again as an operator would (compacted, one
// partition), once the deletion let it.
func recreate(t *testing.T, e *kafkaEnv) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("cacheclient-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(e.topic); err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	eventually3(t, "the topic created again", func() bool {
		err := admin.CreateTopic(e.topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
		var te *sarama.TopicError
		if err != nil && !(errors.As(err, &te) && te.Err == sarama.ErrTopicAlreadyExists) {
			return false
		}
		metas, err := admin.DescribeTopics([]string{e.topic})
		return err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) == 1
	})
}

// eventually3 is eventually with the longer wait a topic's recreation needs (the
// distributor's and the player's topic checks, a take-over, a full epoch).
func eventually3(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
