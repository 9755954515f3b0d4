package testenv_test

import (
	"net/url"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
)

// TestPostgresProxy: the DSN PostgresProxy returns is the one given, but for its host and
// port, which are the proxy's.
func TestPostgresProxy(t *testing.T) {
	const dsn = "postgres://u:secret@db.example:5433/app?sslmode=disable"
	p, got := testenv.PostgresProxy(t, dsn)
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != p.Addr() {
		t.Errorf("host %q, want the proxy's %q", u.Host, p.Addr())
	}
	u.Host = "db.example:5433"
	if u.String() != dsn {
		t.Errorf("DSN %q, want %q through the proxy", got, dsn)
	}
}
