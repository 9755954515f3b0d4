package cachestatus

import (
	"net/http"
	"time"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/statuspage"
)

// Handler returns a status page of c that a service can mount on its own HTTP server: the
// connection, readiness, stream and source positions, lag and staleness with charts of
// their last minutes, the counters, the last error, and per view its entries, position,
// memory and hidden rows. Stats as JSON, or the HTML page (refreshing itself) for a
// browser, by the rule of every status page (the distributor's, the player's): a request
// gets HTML only when its Accept header names text/html and not application/json and its
// path does not end in ".json"; anything else gets JSON. Its charts sample c every few
// seconds from this call until c is closed. Call it once per client. The page shows the
// service's view names and positions: mount it where the service's other admin pages are,
// not on a public port.
func Handler(c *cacheclient.Client) http.Handler {
	hist := statuspage.NewHistory()
	hist.Start(c.Done(), func(h *statuspage.History) { sample(h, c.Stats()) })
	info := c.Info()
	return statuspage.Handler(body, info.Created, c.Stats, func(st cacheclient.Stats) any {
		charts := map[string][]float64{}
		for _, n := range []string{"lag", "stale", "rate"} {
			charts[n] = hist.Values(n)
		}
		for _, v := range st.Views {
			charts["len/"+v.Name] = hist.Values("len/" + v.Name)
		}
		return struct {
			Stream, Service, Instance string
			cacheclient.Stats
			Hist map[string][]float64
		}{info.Stream, info.Service, info.InstanceID, st, charts}
	})
}

// sample records the page's charts: lag in entries, staleness, entries applied per second,
// and each view's size.
func sample(h *statuspage.History, s cacheclient.Stats) {
	h.Gauge("lag", float64(s.LagEntries))
	h.Gauge("stale", s.Staleness.Seconds())
	h.Rate("rate", float64(s.EntriesApplied), time.Now())
	for _, v := range s.Views {
		h.Gauge("len/"+v.Name, float64(v.Len))
	}
}

// body is the cache's page: its identity, state, positions, lag, counters and last error;
// per view its entries, position, memory and hidden rows.
var body = statuspage.New("statecast cache", `{{define "body"}}
<h2>stream {{.Stream}}</h2>
<dl class="kv">
<dt>service / instance</dt><dd>{{.Service}} / {{.Instance}}</dd>
<dt>state</dt><dd>{{if .Stopped}}<span class="bad state">stopped</span> (retrying cannot help: see the last error){{else if not .Connected}}<span class="bad state">disconnected</span>{{else if .Ready}}<span class="ok state">ready</span>{{else}}<span class="warn state">loading</span>{{end}}</dd>
<dt>position</dt><dd class="position">{{.Position}}</dd>
<dt>player head</dt><dd>{{.Head}}</dd>
<dt>source position</dt><dd class="source-position">{{.SourcePosition}}</dd>
<dt>lag (entries)</dt><dd>{{chart (index .Hist "lag") "entries"}} {{.LagEntries}}</dd>
<dt>staleness</dt><dd>{{chart (index .Hist "stale") "s"}} {{dur .Staleness}}</dd>
<dt>entries applied/s</dt><dd>{{chart (index .Hist "rate") "/s"}} {{.EntriesApplied}} in all</dd>
<dt>publication delay</dt><dd>{{dur .Lag}}</dd>
<dt>snapshots / resyncs / reconnects</dt><dd>{{.SnapshotsApplied}} / {{.Resyncs}} / {{.Reconnects}}</dd>
<dt>epoch checks (failed)</dt><dd>{{.EpochChecks}} ({{if .EpochMismatches}}<span class="bad">{{.EpochMismatches}}</span>{{else}}0{{end}})</dd>
<dt>decode / handler errors</dt><dd>{{.DecodeErrors}} / {{.HandlerErrors}}</dd>
<dt>last error</dt><dd>{{if .LastError}}<span class="err">{{.LastError}}</span> ({{ago .LastErrorAt}}){{else}}none{{end}}</dd>
</dl>
<table class="views"><tr><th>view</th><th>entries</th><th>entries history</th><th>position</th><th>memory</th><th>hidden rows</th><th>decode errors</th></tr>
{{range .Views}}<tr><td>{{.Name}}{{if .Selection}}<br><small>{{.Selection}}</small>{{end}}</td><td class="num rows">{{.Len}}</td><td>{{chart (index $.Hist (print "len/" .Name)) "entries"}}</td><td class="num">{{.Position}}</td><td class="num">{{bytes .MemoryBytes}}</td><td class="num{{if .HiddenRows}} bad{{end}}">{{.HiddenRows}}</td><td class="num">{{.DecodeErrors}}</td></tr>
{{end}}</table>{{end}}`, nil)
