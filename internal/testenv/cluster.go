package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KafkaCluster is a KRaft cluster of combined broker/controller nodes started for one test
// by deploy/local/kafka-cluster.sh with its own state directory and ports: replication
// factor 3 and min.insync.replicas=2 by default (docs/kafka.md). A test may kill, pause,
// wipe and restart its nodes; it is stopped at the test's end.
type KafkaCluster struct {
	Brokers []string // node 1's address first; node n has node.id n
	dir     string
	script  string
}

// DedicatedKafkaCluster starts a cluster of nodes (about a minute on a busy 2-core machine:
// that many JVMs). Outside CI it skips when java or the script is missing; under CI it
// fails.
func DedicatedKafkaCluster(t testing.TB, nodes int) *KafkaCluster {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		skipOrFail(t, "testenv: a Kafka cluster needs java: %v", err)
	}
	k := &KafkaCluster{dir: t.TempDir()}
	var out string
	k.script, out = startScript(t, "kafka-cluster.sh", k.stop, k.env(nodes)...)
	m := brokersLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("testenv: %s start printed no STATECAST_KAFKA_BROKERS:\n%s", k.script, out)
	}
	k.Brokers = strings.Split(m[1], ",")
	if len(k.Brokers) != nodes {
		t.Fatalf("testenv: %s start printed %d brokers, want %d:\n%s", k.script, len(k.Brokers), nodes, out)
	}
	return k
}

func (k *KafkaCluster) env(nodes int) []string {
	return []string{"STATECAST_RUN=" + k.dir, "STATECAST_KAFKA_NODES=" + strconv.Itoa(nodes)}
}

// node runs the script's node-<command> for node n (1…).
func (k *KafkaCluster) node(t testing.TB, command string, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", k.script, "node-"+command, strconv.Itoa(n))
	cmd.Env = append(os.Environ(), k.env(len(k.Brokers))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: %s node-%s %d: %v\n%s", k.script, command, n, err, out)
	}
	return string(out)
}

// KillNode ends node n with SIGKILL; it stays down until StartNode.
func (k *KafkaCluster) KillNode(t testing.TB, n int) { t.Helper(); k.node(t, "kill", n) }

// PauseNode stops node n (SIGSTOP); ResumeNode continues it.
func (k *KafkaCluster) PauseNode(t testing.TB, n int)  { t.Helper(); k.node(t, "pause", n) }
func (k *KafkaCluster) ResumeNode(t testing.TB, n int) { t.Helper(); k.node(t, "resume", n) }

// WipeNode kills node n and loses its data directory (formatted again with the cluster's
// ID, the metadata log kept); StartNode then starts it empty.
func (k *KafkaCluster) WipeNode(t testing.TB, n int) { t.Helper(); k.node(t, "wipe", n) }

// StartNode starts node n again on its ports and waits until it answers.
func (k *KafkaCluster) StartNode(t testing.TB, n int) { t.Helper(); k.node(t, "start", n) }

// DataDir is node n's log directory (log.dirs).
func (k *KafkaCluster) DataDir(n int) string {
	return filepath.Join(k.dir, "kafka-cluster", fmt.Sprintf("node-%d", n), "data")
}

func (k *KafkaCluster) stop() {
	for n := 1; n <= len(k.Brokers); n++ {
		b, err := os.ReadFile(filepath.Join(k.dir, "kafka-cluster", fmt.Sprintf("node-%d", n), "kafka.pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT) // a paused JVM cannot handle SIGTERM
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", k.script, "stop")
	cmd.Env = append(os.Environ(), "STATECAST_RUN="+k.dir)
	_ = cmd.Run()
}
