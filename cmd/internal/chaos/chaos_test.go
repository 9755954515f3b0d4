package chaos

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// EnvSeed replays a seed in TestChaosShort.
const EnvSeed = "STATECAST_CHAOS_SEED"

// TestChaosShort is the short chaos run: every kind of fault once on every class of target
// (17 faults), a few thousand changes, three clients. It needs java (the broker), the
// PostgreSQL binaries ($PGBIN, as deploy/local) and the go command: under CI=true their
// absence fails the test, elsewhere it skips. A failure
// prints the seed; STATECAST_CHAOS_SEED=<seed> replays its plan.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes minutes")
	}
	pgbin := os.Getenv("PGBIN") // deploy/local/postgres.sh's setting
	if pgbin == "" {
		pgbin = "/usr/lib/postgresql/15/bin"
	}
	for _, bin := range []string{"java", "go", pgbin + "/postgres"} {
		if _, err := exec.LookPath(bin); err != nil {
			if testenv.InCI() {
				t.Fatalf("chaos run: %s not found: %v", bin, err)
			}
			t.Skipf("chaos run: %s not found: %v", bin, err)
		}
	}
	var seed uint64
	if s := os.Getenv(EnvSeed); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", EnvSeed, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Seed: seed, Duration: 80 * time.Second, Changes: 3000, Faults: 17, Clients: 3, Writers: 2,
		Log: logWriter{t}})
	if res != nil {
		t.Log(res.Summary())
		for _, v := range res.Violations {
			t.Errorf("seed %d: %s", res.Seed, v)
		}
		if res.Dir != "" {
			t.Logf("logs, configs and events kept in %s", res.Dir)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
