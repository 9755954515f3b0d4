package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/statecast/statecast/examples/sportsbook"
)

// httpGet fetches baseURL+path and returns the status and body.
func httpGet(ctx context.Context, baseURL, path string) (int, []byte, error) {
	return httpDo(ctx, http.MethodGet, baseURL+path, "")
}

// httpDo sends a request with body (none when "") and returns the status and the body.
func httpDo(ctx context.Context, method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// showHTTP fetches path from the service and writes what it answered: the curl line, the
// status and a one-glance summary of the JSON (events with their markets and prices, or
// lists of events).
func showHTTP(ctx context.Context, w io.Writer, baseURL, path string) error {
	code, body, err := httpGet(ctx, baseURL, path)
	if err != nil {
		return fmt.Errorf("devenv: GET %s: %w", path, err)
	}
	fmt.Fprintf(w, "   $ curl %s%s   → %d", baseURL, path, code)
	if code != http.StatusOK {
		fmt.Fprintf(w, " %s\n", strings.TrimSpace(string(body)))
		return nil
	}
	var d sportsbook.EventDetail
	var es []sportsbook.Event
	switch {
	case strings.HasPrefix(path, "/events/") && json.Unmarshal(body, &d) == nil:
		fmt.Fprintf(w, "\n%s", summarizeEvent(d))
	case json.Unmarshal(body, &es) == nil:
		fmt.Fprintf(w, " %d events: %s\n", len(es), summarizeEvents(es))
	default:
		fmt.Fprintf(w, " %s\n", strings.TrimSpace(string(body)))
	}
	return nil
}

func summarizeEvents(es []sportsbook.Event) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%d %s (%s)", e.ID, e.Name, e.Status)
	}
	return strings.Join(parts, ", ")
}

// summarizeEvent renders an event detail in a few indented lines.
func summarizeEvent(d sportsbook.EventDetail) string {
	var b strings.Builder
	comp := ""
	if len(d.Markets) > 0 {
		comp = d.Markets[0].Competition
	}
	fmt.Fprintf(&b, "       event %d %q status=%s competition=%q tags=%v\n", d.ID, d.Name, d.Status, comp, d.Tags)
	for _, m := range d.Markets {
		susp := ""
		if m.Suspended {
			susp = "SUSPENDED"
		}
		sels := make([]string, len(m.Selections))
		for i, s := range m.Selections {
			sels[i] = s.Name + " " + s.Price
		}
		fmt.Fprintf(&b, "         market %d %-20s %-9s %s\n", m.MarketID, m.Market.Market, susp, strings.Join(sels, " | "))
	}
	return b.String()
}
