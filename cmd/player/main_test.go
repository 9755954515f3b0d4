package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestLoadConfig(t *testing.T) {
	t.Setenv("STATECAST_KAFKA_BROKERS", "k1:9092")
	fc, err := loadConfig("player.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if fc.Listen != ":7070" || fc.HTTP != ":7071" || len(fc.Brokers) != 1 || fc.Brokers[0] != "k1:9092" ||
		len(fc.Streams) != 1 || fc.Streams[0].Name != "sportsbook" || fc.AckTimeout != 30*time.Second || fc.HistoryBytes != 64<<20 {
		t.Fatalf("decoded %+v", fc)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("brokers: [x]\nstreamz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(bad); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
