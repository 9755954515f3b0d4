package saramapc

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/parallel"
)

const zombieChildEnv = "SARAMAPC_ZOMBIE_CHILD"

// TestTxnZombieChild is the consumer that TestTransactionalZombieFenced pauses; it does
// nothing in a normal run. It processes every input but commits only when its claim ends,
// and says so on stdout once everything is processed.
func TestTxnZombieChild(t *testing.T) {
	if os.Getenv(zombieChildEnv) == "" {
		t.Skip("helper process")
	}
	brokers := testenv.KafkaBrokers(t)
	total, _ := strconv.ParseInt(os.Getenv("SARAMAPC_TOTAL"), 10, 64)
	out := os.Getenv("SARAMAPC_OUT")
	var n atomic.Int64
	cfg := txnConfig(brokers, os.Getenv("SARAMAPC_GROUP"), os.Getenv("SARAMAPC_IN"), func(_ context.Context, r parallel.Record[Message], o *Producer) error {
		echo(o, out, r.Value)
		if n.Add(1) == total {
			fmt.Println("processed all")
		}
		return nil
	})
	cfg.CommitInterval = time.Hour
	cfg.Sarama.Consumer.Group.Session.Timeout = 6 * time.Second // the broker's minimum
	cfg.Sarama.Consumer.Group.Heartbeat.Interval = time.Second
	c, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Run(context.Background())
}

// TestTransactionalZombieFenced: consumer Z processes every input and is paused (SIGSTOP)
// before it commits; its session expires and B takes the partition, processes and commits
// everything. When Z resumes it still holds its outputs and tries to commit them with its
// old group generation: the broker refuses the transaction (KIP-447), Z aborts it and ends
// the claim, and read_committed readers see every output once — B's.
func TestTransactionalZombieFenced(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	in := testenv.NewTopic(t, "pc_zombie_in", nil)
	out := testenv.NewTopic(t, "pc_zombie_out", nil)
	group := testenv.UniqueName("g")
	ins := produceHashed(t, brokers, in, 200, 5)

	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnZombieChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), zombieChildEnv+"=1", "SARAMAPC_GROUP="+group, "SARAMAPC_IN="+in, "SARAMAPC_OUT="+out,
		"SARAMAPC_TOTAL="+strconv.Itoa(len(ins)))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	processed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "processed all" {
				close(processed)
			}
		}
	}()
	fenced := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Logf("zombie: %s", line)
			if strings.Contains(line, "claim fenced") {
				select {
				case fenced <- line:
				default:
				}
			}
		}
	}()
	select {
	case <-processed:
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not process its inputs")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// B joins; the group waits for Z until Z's session expires, then B owns the partition.
	b, stopB := start(t, txnConfig(brokers, group, in, echoHandler(out)))
	cl := newClient(t, brokers)
	waitAllCommitted(t, cl, group, in, ins)
	committed, err := FetchCheckpoint(cl, group, in, 0)
	if err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fenced:
	case <-time.After(60 * time.Second):
		t.Fatal("the zombie never reported a refused commit")
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	after, err := FetchCheckpoint(cl, group, in, 0)
	if err != nil || after.Watermark != committed.Watermark {
		t.Errorf("committed offset moved from %d to %d (%v)", committed.Watermark, after.Watermark, err)
	}
	t.Logf("B: %+v", b.CommitStats())
	checkExactlyOnce(t, ins, readCommitted(t, brokers, out))
}
