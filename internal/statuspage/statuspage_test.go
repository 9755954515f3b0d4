package statuspage

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHistory(t *testing.T) {
	h := NewHistory()
	now := time.Unix(1000, 0)
	for i := range Samples + 10 {
		h.Sample(func(h *History) {
			h.Gauge("g", float64(i))
			h.Rate("r", float64(i*10), now.Add(time.Duration(i)*time.Second))
			if i == 0 {
				h.Gauge("gone", 1)
			}
		})
	}
	g := h.Values("g")
	if len(g) != Samples || g[0] != 10 || g[Samples-1] != Samples+9 {
		t.Fatalf("gauge ring: len %d, first %v, last %v", len(g), g[0], g[len(g)-1])
	}
	if r := h.Values("r"); len(r) != Samples || r[0] != 10 || r[len(r)-1] != 10 {
		t.Fatalf("rate: %v", r)
	}
	if h.Values("gone") != nil {
		t.Fatal("a series not written for a whole history is kept")
	}
}

func TestRender(t *testing.T) {
	p := New("statecast test", `{{define "body"}}<p id="x">{{.X}}</p>{{end}}`, nil)
	w := httptest.NewRecorder()
	p.Render(w, map[string]string{"X": "<b>"}, time.Now().Add(-time.Hour))
	body := w.Body.String()
	for _, want := range []string{`<meta http-equiv="refresh"`, `id="version"`, `<p id="x">&lt;b&gt;</p>`, "1h0m0s"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("the page loads a script or an external asset")
	}
}

func TestFormat(t *testing.T) {
	if Bytes(1536) != "1.5 KiB" || Bytes(10) != "10 B" || Bytes(3<<30) != "3.0 GiB" {
		t.Fatal(Bytes(1536), Bytes(10), Bytes(3<<30))
	}
	if Num(3) != "3" || Num(0.12345) != "0.123" {
		t.Fatal(Num(3), Num(0.12345))
	}
}

// TestHandlerNegotiation: the one rule of every status page: HTML only for a browser's
// request (Accept names text/html, not application/json, on a path not ending in .json);
// JSON for everything else, curl's */* and no Accept header included.
func TestHandlerNegotiation(t *testing.T) {
	page := New("t", `{{define "body"}}<p id="n">{{.}}</p>{{end}}`, nil)
	h := Handler(page, time.Now(), func() map[string]int { return map[string]int{"n": 7} }, func(st map[string]int) any { return st["n"] })
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		path, accept string
		html         bool
	}{
		{"/status", browser, true},
		{"/status", "text/html", true},
		{"/cache/status", browser, true},
		{"/status", "", false},
		{"/status", "*/*", false},
		{"/status", "application/json", false},
		{"/status", "application/json, text/html", false},
		{"/status.json", browser, false},
		{"/status.json", "", false},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		h.ServeHTTP(rec, req)
		ct, body := rec.Header().Get("Content-Type"), rec.Body.String()
		switch {
		case tc.html && (!strings.HasPrefix(ct, "text/html") || !strings.Contains(body, `<p id="n">7</p>`)):
			t.Errorf("%s, Accept %q: want the HTML page, got %s: %s", tc.path, tc.accept, ct, body)
		case !tc.html && (ct != "application/json" || strings.TrimSpace(body) != "{\n  \"n\": 7\n}"):
			t.Errorf("%s, Accept %q: want JSON, got %s: %s", tc.path, tc.accept, ct, body)
		}
	}
}
