package ctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// StatsOptions says which player's admin endpoint to ask, and how.
type StatsOptions struct {
	// Addr is the player's admin address (its admin.addr), host:port or a URL.
	Addr string
	// TLS, when set, makes it https (the player's admin.tls).
	TLS *tls.Config
	// Token is sent as the bearer token (the player's admin.tokens).
	Token string
}

// Stats fetches a player's status page as JSON (GET <addr>/status.json on the player's
// admin endpoint) and prints it indented.
func Stats(ctx context.Context, w io.Writer, o StatsOptions) error {
	base := o.Addr
	if !strings.Contains(base, "://") {
		scheme := "http://"
		if o.TLS != nil {
			scheme = "https://"
		}
		base = scheme + base
	}
	url := strings.TrimSuffix(base, "/") + "/status.json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	client := http.DefaultClient
	if o.TLS != nil {
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: o.TLS}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("stats: read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (an admin token is required: -token-file or $" + EnvToken + ")"
		}
		return fmt.Errorf("stats: %s: %s%s", url, resp.Status, hint)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		return fmt.Errorf("stats: %s did not answer JSON: %w", url, err)
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(w)
	return err
}
