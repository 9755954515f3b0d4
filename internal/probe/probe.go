// Package probe checks a running statecast process from inside its container. The images
// hold a binary and nothing else (no shell, no curl), so each binary is its own health
// check command: `player -probe grpc://127.0.0.1:7070`, `distributor -probe
// http://127.0.0.1:9102/readyz` (docker compose healthchecks run these).
package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Timeout bounds one Run.
const Timeout = 5 * time.Second

// Func checks a target of one URL scheme; nil means healthy.
type Func func(ctx context.Context, target *url.URL) error

// Check checks target once: an http or https URL is healthy when a GET answers 2xx; a URL
// of another scheme is checked by more[scheme].
func Check(ctx context.Context, target string, more map[string]Func) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		return checkHTTP(ctx, u)
	}
	if f := more[u.Scheme]; f != nil {
		return f(ctx, u)
	}
	return fmt.Errorf("%s: cannot probe scheme %q", target, u.Scheme)
}

func checkHTTP(ctx context.Context, u *url.URL) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// Run is what a binary's -probe flag does: Check within Timeout; an error is printed on
// stderr. It returns the exit status: 0 healthy, 1 not.
func Run(prog, target string, more map[string]Func) int {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := Check(ctx, target, more); err != nil {
		fmt.Fprintf(os.Stderr, "%s: probe: %v\n", prog, err)
		return 1
	}
	return 0
}
