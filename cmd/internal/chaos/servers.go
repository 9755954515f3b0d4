package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statecast/statecast/internal/faultproxy"
)

// The run's own PostgreSQL and Kafka, started by deploy/local's scripts with private state
// directories: restarting them disturbs nobody else. The scripts keep a server's data and
// port across stop/start, so the run's components reconnect to the same addresses.

var (
	dsnLine     = regexp.MustCompile(`STATECAST_PG_DSN='([^']+)'`)
	brokersLine = regexp.MustCompile(`STATECAST_KAFKA_BROKERS='([^']+)'`)
)

// script runs deploy/local/<name> with args and env added, returns what it printed.
func script(ctx context.Context, repo, name string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repo, "deploy", "local", name)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// pgServer is the run's PostgreSQL cluster.
type pgServer struct {
	repo string
	env  []string
	data string
	DSN  string // the postgres database, direct
}

func startPostgres(ctx context.Context, repo, dir string) (*pgServer, error) {
	// The server runs as the 'postgres' user, which may not enter the run's directory.
	data := filepath.Join(os.TempDir(), fmt.Sprintf("statecast-chaos-pg-%d-%d", os.Getpid(), time.Now().UnixNano()))
	p := &pgServer{repo: repo, data: data, env: []string{"STATECAST_RUN=" + filepath.Join(dir, "pg"), "STATECAST_PGDATA=" + data,
		// The writers, two distributors (pool, lock, replication, listen) and the checks.
		"STATECAST_PG_EXTRA_CONF=max_connections = 300"}}
	out, err := script(ctx, repo, "postgres.sh", p.env, "start")
	if err != nil {
		return nil, err
	}
	m := dsnLine.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("postgres.sh start printed no DSN:\n%s", out)
	}
	p.DSN = m[1]
	return p, nil
}

// Restart is a fast shutdown and a start on the same port.
func (p *pgServer) Restart(ctx context.Context) error { return p.cycle(ctx, "fast") }

// Crash is an immediate shutdown (no checkpoint: WAL recovery at start) and a start.
func (p *pgServer) Crash(ctx context.Context) error { return p.cycle(ctx, "immediate") }

func (p *pgServer) cycle(ctx context.Context, mode string) error {
	if _, err := script(ctx, p.repo, "postgres.sh", p.env, "stop", mode); err != nil {
		return err
	}
	return p.Start(ctx)
}

// Start starts the stopped cluster; an address change is an error (the components would
// not find it).
func (p *pgServer) Start(ctx context.Context) error {
	out, err := script(ctx, p.repo, "postgres.sh", p.env, "start")
	if err != nil {
		return err
	}
	if m := dsnLine.FindStringSubmatch(out); m == nil || m[1] != p.DSN {
		return fmt.Errorf("postgres.sh start: the server moved (was %s):\n%s", p.DSN, out)
	}
	return nil
}

// Stop stops the cluster and removes its data.
func (p *pgServer) Stop() {
	_, _ = script(context.Background(), p.repo, "postgres.sh", p.env, "stop", "fast")
	_ = os.RemoveAll(p.data)
	_ = os.Remove(p.data + ".initdb.log")
}

// kafkaListener is a broker listener for one component, advertised as its proxy's port.
type kafkaListener struct {
	node  int               // the broker node (1…), in a cluster
	name  string            // KAFKA_LISTENER_NAME
	port  int               // where the broker listens
	proxy *faultproxy.Proxy // where the component connects, and what the metadata says
}

// kafkaServer is the run's Kafka: one broker (deploy/local/kafka.sh) or a cluster of nodes
// (deploy/local/kafka-cluster.sh, each node a broker and a controller).
type kafkaServer struct {
	repo    string
	dir     string
	env     []string
	nodes   int
	Brokers []string // the direct PLAINTEXT listeners (the harness's own clients), node 1 first
}

func (k *kafkaServer) script() string {
	if k.nodes > 1 {
		return "kafka-cluster.sh"
	}
	return "kafka.sh"
}

func startKafka(ctx context.Context, repo, dir string, nodes int, listeners []kafkaListener) (*kafkaServer, error) {
	var spec []string
	for _, l := range listeners {
		if nodes > 1 {
			spec = append(spec, fmt.Sprintf("%d:%s:%d:%d", l.node, l.name, l.port, l.proxy.Port()))
		} else {
			spec = append(spec, fmt.Sprintf("%s:%d:%d", l.name, l.port, l.proxy.Port()))
		}
	}
	k := &kafkaServer{repo: repo, dir: filepath.Join(dir, "kafka"), nodes: max(nodes, 1),
		env: []string{"STATECAST_RUN=" + filepath.Join(dir, "kafka"), "STATECAST_KAFKA_LISTENERS=" + strings.Join(spec, " "),
			"STATECAST_KAFKA_NODES=" + strconv.Itoa(max(nodes, 1))}}
	out, err := script(ctx, repo, k.script(), k.env, "start")
	if err != nil {
		return nil, err
	}
	m := brokersLine.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%s start printed no brokers:\n%s", k.script(), out)
	}
	k.Brokers = strings.Split(m[1], ",")
	if len(k.Brokers) != k.nodes {
		return nil, fmt.Errorf("%s start printed %d brokers, not %d:\n%s", k.script(), len(k.Brokers), k.nodes, out)
	}
	for _, l := range listeners {
		l.proxy.SetTarget(fmt.Sprintf("127.0.0.1:%d", l.port))
	}
	return k, nil
}

// Restart is a graceful stop of every broker and a start with the same data and ports.
func (k *kafkaServer) Restart(ctx context.Context) error {
	if _, err := script(ctx, k.repo, k.script(), k.env, "stop"); err != nil {
		return err
	}
	return k.Start(ctx)
}

// Kill ends every broker with SIGKILL (a crash) and starts them again with their data.
func (k *kafkaServer) Kill(ctx context.Context) error {
	for n := 1; n <= k.nodes; n++ {
		if err := k.KillNode(ctx, n); err != nil {
			return err
		}
	}
	return k.Start(ctx)
}

// pidFile is where the script keeps node n's pid.
func (k *kafkaServer) pidFile(n int) string {
	if k.nodes > 1 {
		return filepath.Join(k.dir, "kafka-cluster", fmt.Sprintf("node-%d", n), "kafka.pid")
	}
	return filepath.Join(k.dir, "kafka", "kafka.pid")
}

// pid of node n's process (0 when it has none running).
func (k *kafkaServer) pid(n int) int {
	b, err := os.ReadFile(k.pidFile(n))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// KillNode ends broker node n (1…) with SIGKILL and waits until it is gone; it stays down.
func (k *kafkaServer) KillNode(_ context.Context, n int) error {
	pid := k.pid(n)
	if pid == 0 {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGCONT) // a paused one, too
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		return fmt.Errorf("kafka node %d (pid %d) still runs after SIGKILL", n, pid)
	}
	return nil
}

// PauseNode stops node n with SIGSTOP; ResumeNode continues it.
func (k *kafkaServer) PauseNode(n int) error  { return k.signal(n, syscall.SIGSTOP) }
func (k *kafkaServer) ResumeNode(n int) error { return k.signal(n, syscall.SIGCONT) }

func (k *kafkaServer) signal(n int, sig syscall.Signal) error {
	pid := k.pid(n)
	if pid == 0 {
		return fmt.Errorf("kafka node %d does not run", n)
	}
	return syscall.Kill(pid, sig)
}

// WipeNode kills node n, removes its data directory and formats it again with the
// cluster's ID (kafka-cluster.sh node-wipe); it stays down.
func (k *kafkaServer) WipeNode(ctx context.Context, n int) error {
	if k.nodes < 2 {
		return fmt.Errorf("kafka: a single broker cannot lose its data and recover it")
	}
	_, err := script(ctx, k.repo, k.script(), k.env, "node-wipe", strconv.Itoa(n))
	return err
}

// StartNode starts node n again (with its data, or empty after WipeNode) and waits until
// it answers.
func (k *kafkaServer) StartNode(ctx context.Context, n int) error {
	if k.nodes < 2 {
		return k.Start(ctx)
	}
	_, err := script(ctx, k.repo, k.script(), k.env, "node-start", strconv.Itoa(n))
	return err
}

// Start starts the stopped brokers; an address change is an error.
func (k *kafkaServer) Start(ctx context.Context) error {
	out, err := script(ctx, k.repo, k.script(), k.env, "start")
	if err != nil {
		return err
	}
	if m := brokersLine.FindStringSubmatch(out); m == nil || m[1] != strings.Join(k.Brokers, ",") {
		return fmt.Errorf("%s start: the broker moved (was %v):\n%s", k.script(), k.Brokers, out)
	}
	return nil
}

// Stop stops the brokers; their data goes with the run's directory.
func (k *kafkaServer) Stop() {
	_, _ = script(context.Background(), k.repo, k.script(), k.env, "stop")
}
