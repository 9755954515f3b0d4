package testenv

import (
	"net/url"
	"testing"

	"github.com/statecast/statecast/internal/faultproxy"
)

// NewProxy starts a TCP fault proxy (internal/faultproxy) to target ("host:port") for an
// outage test, and closes it when the test ends. Cut closes every live connection and
// makes the proxy refuse new ones (a client sees a broken connection, not a hang);
// Restore forwards again.
func NewProxy(t testing.TB, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// PostgresProxy starts a proxy (NewProxy) to the host and port of dsn and returns it with
// dsn rewritten to go through it.
func PostgresProxy(t testing.TB, dsn string) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("testenv: PostgresProxy needs a URL DSN (postgres://…), got %q: %v", dsn, err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}
