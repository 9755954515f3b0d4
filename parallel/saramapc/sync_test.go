package saramapc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

// TestCommitSyncFailureEndsRun: a static member is removed from its group by an admin while
// it works, so its next commit is refused. Under CommitSync, Run ends with the commit's
// error; under CommitAsync the failure is logged, the consumer joins again and finishes.
func TestCommitSyncFailureEndsRun(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	for _, mode := range []CommitMode{CommitSync, CommitAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			topic := testenv.NewTopic(t, "pc_syncfail", nil)
			group := testenv.UniqueName("g")
			offs := produce(t, brokers, topic, keyed(200, 1, "v")...)
			cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
				time.Sleep(10 * time.Millisecond)
				return nil
			})
			cfg.Commit = mode
			cfg.Sarama.Consumer.Group.InstanceId = "member-1"
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cl := newClient(t, brokers)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.Run(ctx) }()
			waitCommitted(t, cl, group, topic, "a first commit", func(cp parallel.Checkpoint) bool { return cp.Watermark > offs[10] })
			admin, err := sarama.NewClusterAdminFromClient(cl)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.RemoveMemberFromConsumerGroup(group, []string{"member-1"}); err != nil {
				t.Fatal(err)
			}
			if mode == CommitSync {
				select {
				case err := <-errc:
					if err == nil {
						t.Fatal("Run returned nil")
					}
					t.Logf("Run: %v", err)
				case <-time.After(60 * time.Second):
					t.Fatal("Run did not end after a refused commit")
				}
				return
			}
			waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st := c.CommitStats(); st.Failed == 0 {
				t.Logf("no commit failed (the member rejoined before its next commit): %+v", st)
			}
		})
	}
}

// TestCommitSyncWhileIntakeBlocked: under CommitSync the commits run on the goroutine that
// submits; with one key stuck and intake blocked at the buffer bound, they still happen
// every interval and carry the completed set.
func TestCommitSyncWhileIntakeBlocked(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_syncblocked", nil)
	group := testenv.UniqueName("g")
	var kvs []string
	for i := range 200 {
		k := fmt.Sprint("k", i)
		if i%50 == 0 {
			k = "stuck"
		}
		kvs = append(kvs, k, "v")
	}
	offs := produce(t, brokers, topic, kvs...)
	release := make(chan struct{})
	cfg := testConfig(brokers, group, topic, func(ctx context.Context, r parallel.Record[Message]) error {
		if string(r.Key) == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg.Commit = CommitSync
	cfg.Engine.MaxBufferedRecords = 20
	c, stop := start(t, cfg)
	cl := newClient(t, brokers)
	// Intake holds at the bound: the stuck record plus 19 done ones; they are committed.
	waitCommitted(t, cl, group, topic, "the completed set while intake is blocked", func(cp parallel.Checkpoint) bool {
		return cp.Watermark == offs[0] && cp.Contains(offs[1]) && cp.Contains(offs[19])
	})
	for _, s := range c.Stats() {
		if s.Queued+s.InFlight > 20 {
			t.Fatalf("stats %+v exceed the bound", s)
		}
	}
	close(release)
	waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
