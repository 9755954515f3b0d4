package ctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"text/tabwriter"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/player"
)

// StatsOptions says which player's admin endpoint to ask, and how.
type StatsOptions struct {
	// Addr is the player's admin address (its admin.addr), host:port or a URL.
	Addr string
	// TLS, when set, makes it https (the player's admin.tls).
	TLS *tls.Config
	// Token is sent as the bearer token (the player's admin.tokens).
	Token string
	// Output is "json" (the default: the status as the player sends it, indented) or
	// "table" (one line per stream and per target).
	Output string
}

// Output formats of get and stats.
const (
	OutputJSON  = "json"
	OutputTable = "table"
)

// CheckOutput returns an error for an output format that is neither OutputJSON nor
// OutputTable ("" is the default).
func CheckOutput(o string) error {
	switch o {
	case "", OutputJSON, OutputTable:
		return nil
	}
	return fmt.Errorf("-o %q: want table or json", o)
}

// Stats fetches a player's status page as JSON (GET <addr>/status.json on the player's
// admin endpoint) and prints it indented, or as a table.
func Stats(ctx context.Context, w io.Writer, o StatsOptions) error {
	if err := CheckOutput(o.Output); err != nil {
		return err
	}
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
	// The token may come from $STATECAST_TOKEN without the operator thinking of it: it
	// never crosses a network in the clear (the admin endpoint refuses tokens over
	// plaintext beyond loopback too).
	if o.Token != "" && req.URL.Scheme != "https" && !daemon.IsLoopback(hostPort(req.URL)) {
		return fmt.Errorf("stats: %s: a token is sent over TLS only, or to a loopback address: add -tls (and -ca), or unset -token-file / $%s", url, EnvToken)
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
	if o.Output == OutputTable {
		var st player.Status
		if err := json.Unmarshal(body, &st); err != nil {
			return fmt.Errorf("stats: %s did not answer a player's status: %w", url, err)
		}
		return statsTable(w, &st)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		return fmt.Errorf("stats: %s did not answer JSON: %w", url, err)
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(w)
	return err
}

// statsTable prints a player's status: one line per stream, then one per target.
func statsTable(w io.Writer, st *player.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tTOPIC\tREADY\tINDEX\tROWS\tSOURCE POSITION\tTARGETS\tFETCH ERROR")
	for _, s := range st.Streams {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\t%d\t%s\n", s.Name, s.Topic, s.Ready, s.Current, s.Rows, dash(s.SourcePosition), len(s.Targets), dash(s.FetchError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	targets := 0
	for _, s := range st.Streams {
		targets += len(s.Targets)
	}
	if targets == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "STREAM\tTARGET\tSERVICE\tSTATE\tTERM\tACKED\tLAG\tLAG SECONDS\tQUEUE BYTES\tRECOVERIES")
	for _, s := range st.Streams {
		for _, t := range s.Targets {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f\t%d\t%d\n", s.Name, t.ID, t.Service, t.State, t.Term, t.LastAck, t.LagEntries, t.LagSeconds, t.QueueBytes, t.Recoveries)
		}
	}
	return tw.Flush()
}

// hostPort is u's host:port, the port its scheme's default when u names none.
func hostPort(u *neturl.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
