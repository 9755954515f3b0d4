package cacheclient

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the embedded library light: gRPC and protobuf, never a Kafka or
// PostgreSQL client, the Prometheus client (cacheprom) or the status page (cachestatus:
// its templates and charts).
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	forbidden := []string{"github.com/IBM/sarama", "github.com/jackc/pgx", "github.com/twmb/franz-go", "github.com/prometheus/",
		"github.com/statecast/statecast/internal/statuspage", "github.com/statecast/statecast/cacheclient/cachestatus"}
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
	// html/template comes in through gRPC (golang.org/x/net/trace): no package of statecast
	// linked by the core may import it itself.
	out, err = exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		if strings.HasPrefix(pkg, "github.com/statecast/statecast") && strings.Contains(imports+" ", " html/template ") {
			t.Errorf("%s, linked by cacheclient, imports html/template", pkg)
		}
	}
}
