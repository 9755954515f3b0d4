package cacheclient

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

var (
	topicA = []byte("topic-A-01234567")
	topicB = []byte("topic-B-01234567")
)

// TestTopicIDKeptWithIndex: the topic ID the player's frames carry is kept with the
// applied index — in the state file too — and sent back in Hello.topic_id on every resume,
// so that a player whose topic was deleted and created again can tell that the index is an
// offset of another topic.
func TestTopicIDKeptWithIndex(t *testing.T) {
	dir := t.TempDir()
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex == nil {
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 5}}, TopicId: topicA}); err != nil {
				return err
			}
			if err := s.batch(ent(1, "1", evJSON(1, "a"))); err != nil {
				return err
			}
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 5}}, TopicId: topicA}); err != nil {
				return err
			}
			if err := s.waitAck(5); err != nil {
				return err
			}
			return errors.New("end of stream") // the client resumes
		}
		return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 5}}, TopicId: topicA})
	})
	c, _ := startClient(t, Config{StateDir: dir}, nil, fp)
	waitReady(t, c)
	fp.waitFor(t, "a resume with the topic ID", func(hellos []*statecastv1.Hello, _ []int64) bool {
		return len(hellos) >= 2 && bytes.Equal(hellos[1].GetTopicId(), topicA) && hellos[1].GetResumeIndex() == 5
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := readState(b, "s", nil, &memSink{})
	if err != nil || head.index != 5 || head.topic != string(topicA) || head.version != 5 {
		t.Fatalf("state file head %+v, %v", head, err)
	}

	fp2 := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 5}}, TopicId: topicA})
	})
	c2, v := startClient(t, Config{StateDir: dir}, nil, fp2)
	waitReady(t, c2)
	fp2.waitFor(t, "the restarted client's hello", func(hellos []*statecastv1.Hello, _ []int64) bool { return len(hellos) >= 1 })
	fp2.mu.Lock()
	h := fp2.hellos[0]
	fp2.mu.Unlock()
	if h.GetResumeIndex() != 5 || !bytes.Equal(h.GetTopicId(), topicA) || v.Len() != 1 {
		t.Fatalf("restart: resume %d topic %q rows %d", h.GetResumeIndex(), h.GetTopicId(), v.Len())
	}
}

// TestTopicChangedInStream: a player that delivers another topic than the one the client
// resumed on, without a resync, makes the client drop its resume index: it resubscribes
// without one and gets a snapshot, instead of applying offsets of another topic on top of
// its state. A ResyncRequired (TOPIC_CHANGED) followed by a snapshot of the new topic is
// the normal case: the client takes the new topic ID from it.
func TestTopicChangedInStream(t *testing.T) {
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		switch conn {
		case 0:
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 5}}, TopicId: topicA}); err != nil {
				return err
			}
			if err := s.batch(ent(1, "1", evJSON(1, "a"))); err != nil {
				return err
			}
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 5}}, TopicId: topicA}); err != nil {
				return err
			}
			return errors.New("end of stream")
		case 1: // resumes on A; this player serves B and does not say so
			if h.GetResumeIndex() != 5 || !bytes.Equal(h.GetTopicId(), topicA) {
				return errors.New("want a resume at 5 of topic A")
			}
			return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 9}}, TopicId: topicB})
		case 2: // must not resume
			if h.ResumeIndex != nil {
				return errors.New("resumed after a topic change")
			}
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 3}}, TopicId: topicB}); err != nil {
				return err
			}
			if err := s.batch(ent(2, "2", evJSON(2, "b"))); err != nil {
				return err
			}
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 3}}, TopicId: topicB}); err != nil {
				return err
			}
			return errors.New("end of stream")
		case 3: // resumes on B; the player's topic changed again: resync, snapshot of C
			if h.GetResumeIndex() != 3 || !bytes.Equal(h.GetTopicId(), topicB) {
				return errors.New("want a resume at 3 of topic B")
			}
			topicC := []byte("topic-C-01234567")
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: &statecastv1.ResyncRequired{
				Reason: statecastv1.ResyncRequired_REASON_TOPIC_CHANGED}}, TopicId: topicC}); err != nil {
				return err
			}
			if err := s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 1}}, TopicId: topicC}); err != nil {
				return err
			}
			if err := s.batch(ent(1, "3", evJSON(3, "c"))); err != nil {
				return err
			}
			return s.send(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 1}}, TopicId: topicC})
		}
		return nil
	})
	c, v := startClient(t, Config{}, nil, fp)
	fp.waitFor(t, "the snapshot of topic C acknowledged", func(hellos []*statecastv1.Hello, acks []int64) bool {
		return len(hellos) >= 4 && lastAck(acks) == 1
	})
	waitCond(t, "the view of topic C", func() bool {
		_, ok := v.Get("3")
		return ok && v.Len() == 1
	})
	c.applyMu.Lock()
	topic := c.topic
	c.applyMu.Unlock()
	if topic != "topic-C-01234567" || c.Stats().Resyncs < 2 {
		t.Fatalf("topic %q, resyncs %d", topic, c.Stats().Resyncs)
	}
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
