package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/internal/testenv"
)

// startPlayerProc runs the player command (./cmd/player) as a separate process serving one
// stream "s" on topic, as in production, and returns its gRPC address once its health is
// SERVING (every stream materialised). The binary is built once into a temp dir, or taken
// from CC_BENCH_PLAYER_BIN. The process is stopped (SIGTERM, then SIGKILL) when the
// benchmark ends.
func startPlayerProc(b testing.TB, brokers []string, topic string) string {
	b.Helper()
	dir := b.TempDir()
	bin := os.Getenv("CC_BENCH_PLAYER_BIN")
	if bin == "" {
		// Built in the root module: this module's go.sum holds only what its tests import.
		bin = testenv.BuildCommand(b, "github.com/statecast/statecast/cmd/player")
	}
	// The same settings as startPlayerB (in-process player); everything else default.
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	bl := make([]string, len(brokers))
	for i, br := range brokers {
		bl[i] = q(br)
	}
	cfg := fmt.Sprintf("insecure: true\nlisten: \"127.0.0.1:0\"\nhttp_addr: \"127.0.0.1:0\"\nadmin: {addr: \"\"}\nbrokers: [%s]\nclient_id: cacheclient-bench-player\n"+
		"streams: [{name: s, topic: %s}]\nprogress_interval: 50ms\nshutdown_grace: 1s\n", strings.Join(bl, ", "), q(topic))
	cfgPath := filepath.Join(dir, "player.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	addrc := make(chan string, 1)
	go func() {
		// The player logs JSON lines to stderr; the first "player listening" names the
		// gRPC address. Forwarded with CC_BENCH_LOG, otherwise drained.
		var fwd io.Writer = io.Discard
		if os.Getenv("CC_BENCH_LOG") != "" {
			fwd = os.Stderr
		}
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var m struct {
				Msg  string `json:"msg"`
				GRPC string `json:"grpc"`
			}
			if json.Unmarshal(line, &m) == nil && m.Msg == "player listening" {
				select {
				case addrc <- m.GRPC:
				default:
				}
			}
			fmt.Fprintf(fwd, "player: %s\n", line)
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	var addr string
	select {
	case addr = <-addrc:
	case <-exited:
		b.Fatal("player process exited before listening")
	case <-time.After(time.Minute):
		b.Fatal("player process: no listening address after 1 minute")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return addr
		}
		select {
		case <-exited:
			b.Fatal("player process exited before SERVING")
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("player process not SERVING after 5 minutes (last: %v, %v)", r.GetStatus(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
