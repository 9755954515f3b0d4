package saramapc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

const crashEnv = "SARAMAPC_CRASH_CHILD"

// TestCrashChild is the consumer process that TestKill9RestartNoReprocessing kills; it does
// nothing in a normal run.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashEnv) == "" {
		t.Skip("helper process")
	}
	brokers := testenv.KafkaBrokers(t)
	stuck, _ := strconv.ParseInt(os.Getenv("SARAMAPC_STUCK"), 10, 64)
	cfg := testConfig(brokers, os.Getenv("SARAMAPC_GROUP"), os.Getenv("SARAMAPC_TOPIC"), func(ctx context.Context, r parallel.Record[Message]) error {
		if r.Offset == stuck {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Run(context.Background()) // runs until killed
}

// TestKill9RestartNoReprocessing: the consumer process is killed with SIGKILL (no final
// commit, no leave-group) while a record is stuck; the periodic commits carried the completed
// set, so the next consumer runs only the stuck record and the records of its key behind it.
func TestKill9RestartNoReprocessing(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_kill", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(60, 6, "v")...)
	stuckOff := offs[3] // key k3
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"=1", "SARAMAPC_GROUP="+group, "SARAMAPC_TOPIC="+topic,
		"SARAMAPC_STUCK="+strconv.FormatInt(stuckOff, 10))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	cl := newClient(t, brokers)
	waitCommitted(t, cl, group, topic, "completed set", func(cp parallel.Checkpoint) bool {
		if cp.Watermark != stuckOff {
			return false
		}
		for i, o := range offs {
			if i%6 != 3 && !cp.Contains(o) {
				return false
			}
		}
		return true
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true

	rec := newRecorder()
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec.add(r.Value)
		return nil
	})
	_, stop := start(t, cfg)
	// The dead member holds the partition until its session (10s) expires.
	last := offs[len(offs)-1]
	waitCommitted(t, cl, group, topic, "watermark at end", func(cp parallel.Checkpoint) bool { return cp.Watermark == last+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := rec.processed()
	for i, o := range offs {
		want := 0
		if i%6 == 3 {
			want = 1
		}
		if got[o] != want {
			t.Errorf("resumable: offset %d (key k%d) processed %d times after the crash, want %d", o, i%6, got[o], want)
		}
	}
	rec.checkKeyOrder(t)
}
