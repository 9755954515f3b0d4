package cacheclient

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the embedded library light: gRPC and protobuf, never a Kafka or
// PostgreSQL client.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	forbidden := []string{"github.com/IBM/sarama", "github.com/jackc/pgx", "github.com/twmb/franz-go", "github.com/prometheus/"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("cacheclient depends on %s", dep)
			}
		}
	}
	if !strings.Contains(string(out), "google.golang.org/grpc\n") {
		t.Errorf("expected a dependency on gRPC; got:\n%s", out)
	}
}
