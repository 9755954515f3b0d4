// Package statuspage is what the status pages of the distributor, the player and
// cacheclient share: one handler with one rule for JSON or HTML (Handler, WantsJSON), one
// layout (version, uptime, auto-refresh, embedded CSS, no script and no external asset), a
// short in-memory history of samples per series, and inline-SVG charts drawn from it, each
// with its axes (the range in its unit, the time span) and its current value (chart.go).
// A number alone says little about a lag or a rate; its last few minutes say whether it
// grows.
package statuspage

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/statecast/statecast/internal/version"
)

// Samples is how many samples a series keeps; with Interval, ten minutes.
const (
	Samples  = 120
	Interval = 5 * time.Second
)

// series is a ring of the last Samples values, oldest first when read.
type series struct {
	vals []float64
	next int
	last uint64 // the sample round it was last written in
	// rate: the counter and the time of the previous sample.
	prev   float64
	prevAt time.Time
}

func (s *series) add(v float64) {
	if len(s.vals) < Samples {
		s.vals = append(s.vals, v)
		return
	}
	s.vals[s.next] = v
	s.next = (s.next + 1) % Samples
}

func (s *series) values() []float64 {
	out := make([]float64, 0, len(s.vals))
	out = append(out, s.vals[s.next:]...)
	return append(out, s.vals[:s.next]...)
}

// History holds named series of samples. Safe for concurrent use.
type History struct {
	mu     sync.Mutex
	series map[string]*series
	round  uint64
	start  sync.Once
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{series: map[string]*series{}} }

func (h *History) get(name string) *series {
	s := h.series[name]
	if s == nil {
		s = &series{}
		h.series[name] = s
	}
	s.last = h.round
	return s
}

// Gauge records a value of the series name.
func (h *History) Gauge(name string, v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.get(name).add(v)
}

// Rate records the per-second rate of a counter: its increase since the previous sample of
// name, divided by the time between them (nothing at the first sample; a counter that went
// down, a restart, counts from zero).
func (h *History) Rate(name string, counter float64, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	if !s.prevAt.IsZero() {
		if dt := now.Sub(s.prevAt).Seconds(); dt > 0 {
			d := counter - s.prev
			if d < 0 {
				d = counter
			}
			s.add(d / dt)
		}
	}
	s.prev, s.prevAt = counter, now
}

// Values returns the samples of name, oldest first (nil: none).
func (h *History) Values(name string) []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.series[name]; s != nil {
		return s.values()
	}
	return nil
}

// Sample runs take once, as one round: series that take no longer writes for a whole
// history (a target that left) are dropped, so the history stays bounded.
func (h *History) Sample(take func(*History)) {
	h.mu.Lock()
	h.round++
	h.mu.Unlock()
	take(h)
	h.mu.Lock()
	for name, s := range h.series {
		if h.round-s.last > Samples {
			delete(h.series, name)
		}
	}
	h.mu.Unlock()
}

// Start samples with take now and then every Interval until done is closed, in a
// goroutine. Only the first call starts it: a page may be asked for its handler more than
// once.
func (h *History) Start(done <-chan struct{}, take func(*History)) {
	h.start.Do(func() {
		h.Sample(take)
		go func() {
			t := time.NewTicker(Interval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					h.Sample(take)
				}
			}
		}()
	})
}

// Num formats a number for a person: integers as such, others with three significant
// digits.
func Num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3g", v)
}

// Bytes formats a byte count with a binary unit.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	d, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		d *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(d), "KMGTPE"[exp])
}

// Ago formats the time since t ("never" for the zero time).
func Ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return Duration(time.Since(t)) + " ago"
}

// Duration formats d rounded to what a person reads.
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// Funcs are the template functions of every page.
var Funcs = template.FuncMap{
	"chart": Chart, "qty": Quantity, "num": Num, "bytes": Bytes, "ago": Ago, "dur": Duration,
	"secs": func(s float64) string { return Duration(time.Duration(s * float64(time.Second))) },
}

// layout frames every page: the title, the process's version and uptime, an auto-refresh
// every Interval, and the CSS. Classes: ok, warn, bad (a state cell), num (right-aligned),
// err (an error text).
const layout = `<!doctype html>
<html><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#111;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #ccc}
.meta{color:#555;margin-bottom:1em}.meta span{margin-right:1.5em}
table{border-collapse:collapse;margin:.4em 0 1em;background:#fff}
th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #e5e5e5;vertical-align:middle}
th{background:#f0f0f0;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#166534;font-weight:600}.warn{color:#92400e;font-weight:600}.bad{color:#b91c1c;font-weight:600}
.err{color:#b91c1c}.chart{vertical-align:middle;background:#fff;border:1px solid #e2e8f0}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:.4em 0}dl.kv dt{color:#555}dl.kv dd{margin:0}
</style></head>
<body><h1>{{.Title}}</h1>
<div class="meta"><span>version <b id="version">{{.Version}}</b></span><span>up <b id="uptime">{{.Uptime}}</b></span><span>refreshes every {{.Refresh}}s</span><span>{{.Now}}</span></div>
{{template "body" .Data}}
</body></html>`

// Page is one status page: New it with the body template (which defines "body" and sees
// the data passed to Render).
type Page struct {
	t     *template.Template
	title string
}

// New parses body (a template that defines "body") into the layout, with Funcs and funcs
// (the page's own) as its functions.
func New(title, body string, funcs template.FuncMap) *Page {
	t := template.Must(template.New("layout").Funcs(Funcs).Funcs(funcs).Parse(layout))
	template.Must(t.Parse(body))
	return &Page{t: t, title: title}
}

// Render writes the page with data; started is when the component started (its uptime).
func (p *Page) Render(w http.ResponseWriter, data any, started time.Time) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = p.t.Execute(w, struct {
		Title, Version, Uptime, Now string
		Refresh                     int
		Data                        any
	}{p.title, version.Get().Version, Duration(time.Since(started)), time.Now().UTC().Format("2006-01-02 15:04:05 UTC"),
		int(Interval / time.Second), data})
}

// WantsJSON is the one rule by which every status page chooses between its JSON and its
// HTML: a request gets the HTML page only when it asks for it the way a browser does, by
// an Accept header that names text/html and not application/json, on a path that does not
// end in ".json". Anything else gets JSON: a path ending in ".json" whatever its Accept
// header, Accept: application/json, and a request that names no type (curl, a script, a
// probe), so that a program never has to parse HTML.
func WantsJSON(r *http.Request) bool {
	if strings.HasSuffix(r.URL.Path, ".json") {
		return true
	}
	accept := r.Header.Get("Accept")
	return !strings.Contains(accept, "text/html") || strings.Contains(accept, "application/json")
}

// Handler is the handler of every status page (the distributor's, the player's and a
// cache's): at each request it takes the component's status, and by WantsJSON serves it as
// indented JSON or renders page with html(status) as the page's data (started: the
// component's start, for its uptime).
func Handler[T any](page *Page, started time.Time, status func() T, html func(T) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := status()
		if WantsJSON(r) {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(st)
			return
		}
		page.Render(w, html(st), started)
	})
}
