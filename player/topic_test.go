package player

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestTopicReplaced: the stream's topic is deleted and created again under a running
// player, and the new topic soon holds more records than the old one had, so that a
// client's old resume index is a valid offset of the new topic. The player must not resume
// anyone there: it serves the new topic from its start, ends its targets, and a client that
// resumes with the old topic's ID gets ResyncRequired (TOPIC_CHANGED) and a snapshot of
// the new topic — never the records after its old index. Every message but batches carries
// the topic ID.
func TestTopicReplaced(t *testing.T) {
	e := newEnv(t, nil)
	rnd := newRand(41)
	e.produce(200, []string{"a", "b"}, 50, rnd)
	tp := startPlayer(t, e, nil)
	c := newClient("c", e.chk)
	last := e.lastOffset()
	sessionUntil(t, c, tp.addr, 30*time.Second, func() bool { return c.Applied() >= last })
	if len(c.topics) != 1 || len(c.topics[0]) != 16 {
		t.Fatalf("topic IDs received: %x", c.topics)
	}
	old := c.topics[0]

	// A second client stays connected through the replacement: its stream must end.
	live := newClient("live", checker.New())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	liveErr := make(chan error, 1)
	go func() { liveErr <- live.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the live client caught up", func() bool { return live.Applied() >= last })

	recreateTopic(t, e)
	e.chk = checker.New() // the truth is the new topic's from here on
	e.mu.Lock()
	e.last = -1
	e.mu.Unlock()
	e.produce(400, []string{"a", "b"}, 50, rnd)
	newLast := e.lastOffset()
	if newLast <= last {
		t.Fatalf("the new topic ends at %d, not past the old index %d", newLast, last)
	}
	select {
	case err := <-liveErr:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the connected target ended with %v, want Unavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the connected target was not ended")
	}

	// The first client comes back with its old index and topic ID.
	c2 := newClient("c", e.chk)
	c2.applied, c2.hasState, c2.topic = c.applied, true, old
	sessionUntil(t, c2, tp.addr, 60*time.Second, func() bool { return c2.Applied() >= newLast })
	if want := []statecastv1.ResyncRequired_Reason{statecastv1.ResyncRequired_REASON_TOPIC_CHANGED}; !slices.Equal(c2.resyncs, want) {
		t.Errorf("resyncs %v, want %v", c2.resyncs, want)
	}
	if len(c2.topics) != 1 || bytes.Equal(c2.topics[0], old) {
		t.Errorf("topic IDs after the replacement: %x (old %x)", c2.topics, old)
	}
	e.check() // ordered, unique, reliable against the new topic: a snapshot, then the rest
}

// recreateTopic deletes e's topic and creates it again (compacted, one partition).
func recreateTopic(t *testing.T, e *env) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(e.topic); err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	waitFor(t, 30*time.Second, "the topic created again", func() bool {
		err := admin.CreateTopic(e.topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
		var te *sarama.TopicError
		return err == nil || (errors.As(err, &te) && te.Err == sarama.ErrTopicAlreadyExists && topicUsable(e))
	})
}

// topicUsable reports whether e's topic has a leader (created and not being deleted).
func topicUsable(e *env) bool {
	client, err := sarama.NewClient(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		return false
	}
	defer client.Close()
	_, err = client.Leader(e.topic, 0)
	return err == nil
}

// TestTopicReplacedByUnusable: the stream's topic is deleted and created again with three
// partitions under a running player. The new topic is checked as the first one was: the
// stream is unavailable, naming the partitions, instead of serving one partition of three.
func TestTopicReplacedByUnusable(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(50, []string{"a"}, 20, newRand(51))
	tp := startPlayer(t, e, nil)
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(e.topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the topic created again with 3 partitions", func() bool {
		err := admin.CreateTopic(e.topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
		var te *sarama.TopicError
		return err == nil || (errors.As(err, &te) && te.Err == sarama.ErrTopicAlreadyExists && topicUsable(e))
	})
	waitFor(t, 60*time.Second, "the stream unavailable", func() bool { return tp.p.streams["s"].Status().State == StreamUnavailable })
	if st := tp.p.streams["s"].Status(); !strings.Contains(st.FetchError, "3 partitions") {
		t.Errorf("status of the stream on a 3-partition topic: %+v", st)
	}
}
