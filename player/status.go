package player

import (
	"cmp"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/statecast/statecast/internal/statuspage"
)

// Status is a point-in-time view of the player (the status page and the metrics).
type Status struct {
	Streams []StreamStatus `json:"streams"`
}

// StreamStatus describes one stream.
type StreamStatus struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// State is StreamStarting, StreamReady, StreamError or StreamUnavailable, derived from
	// the current cause (FetchError): it is ready again as soon as the cause clears.
	State string `json:"state"`
	// Ready: State is StreamReady.
	Ready   bool  `json:"ready"`
	Current int64 `json:"current"`
	Rows    int   `json:"rows"`
	// SourcePosition is the source position of the latest position record read (the LSN
	// text, "" when none was read or the stream has none: polling).
	SourcePosition string    `json:"source_position,omitempty"`
	LastLog        time.Time `json:"last_log_time"`
	Retention      string    `json:"tombstone_horizon,omitempty"`
	// FetchError is the current cause of State error or unavailable ("" otherwise): what
	// the main fetcher or the topic check fails on now, or why the topic cannot be served.
	FetchError string `json:"fetch_error,omitempty"`
	// LastError is the last error the stream met, current or not, and LastErrorAt when.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// RetryAt is when an unavailable stream is tried again.
	RetryAt time.Time      `json:"retry_at,omitzero"`
	Targets []TargetStatus `json:"targets"`
}

// TargetStatus describes one connected target.
type TargetStatus struct {
	// ID is the instance id (Hello.client_id); Service its service; Principal who it
	// authenticated as ("" anonymous).
	ID        string   `json:"id"`
	Service   string   `json:"service"`
	Principal string   `json:"principal,omitempty"`
	Views     []string `json:"views"`
	// Selections: by view, what the target receives of it (its filter, with its grant's,
	// and its shard; selection.String); absent views are received whole.
	Selections  map[string]string `json:"selections,omitempty"`
	State       string            `json:"state"`
	Term        uint64            `json:"term"`
	LastAck     int64             `json:"last_ack"`
	SentUpTo    int64             `json:"sent_up_to"`
	LagEntries  int64             `json:"lag_entries"`
	LagSeconds  float64           `json:"lag_seconds"` // age of the oldest unacknowledged record
	QueueBytes  int64             `json:"queue_bytes"`
	Normal      int               `json:"normal_len"`
	Catchup     int               `json:"catchup_len"`
	Unacked     int               `json:"unacked_batches"`
	Recoveries  int               `json:"recoveries"`
	Overflows   int               `json:"overflows"`
	ConnectedAt time.Time         `json:"connected_at"`
}

// Status returns the current status of every stream and target.
func (p *Player) Status() Status {
	var out Status
	for _, name := range p.streamNames {
		s := p.streams[name]
		ss := StreamStatus{Name: name, Topic: s.cfg.Topic, Current: s.current.Load()}
		s.mu.Lock()
		ss.State, ss.FetchError = s.stateLocked()
		ss.Ready = ss.State == StreamReady
		ss.LastError, ss.LastErrorAt = s.lastErr, s.lastErrAt
		if s.phase == phaseUnavailable {
			ss.RetryAt = s.retryAt
		}
		if s.retention > 0 {
			ss.Retention = s.retention.String()
		}
		ss.Rows, ss.LastLog, ss.SourcePosition = s.nrows, s.lastLog, s.posLSN
		s.mu.Unlock()
		for _, t := range s.targetsSnapshot() {
			t.mu.Lock()
			ts := TargetStatus{
				ID: t.id, Service: t.service, Principal: t.principal.Name, Views: t.viewList, State: t.q.state.String(), Term: t.q.term,
				LastAck: t.lastAck, SentUpTo: t.sentUpTo, QueueBytes: t.q.queuedBytes() + t.q.poppedBytes,
				Normal: t.q.normal.len(), Catchup: t.q.catchup.len(), Unacked: len(t.q.popped),
				Recoveries: t.recoveries, Overflows: t.overflows, ConnectedAt: t.connected,
			}
			for _, sel := range t.sels {
				if ts.Selections == nil {
					ts.Selections = map[string]string{}
				}
				ts.Selections[sel.view] = sel.String()
			}
			t.mu.Unlock()
			if lag := ss.Current - ts.LastAck; lag > 0 {
				ts.LagEntries = lag
				// Age of the oldest record the target has not acknowledged (a bound from the
				// log timeline, within 1s).
				s.mu.Lock()
				if at, ok := s.firstAfterTime(ts.LastAck); ok {
					ts.LagSeconds = max(0, time.Since(at).Seconds())
				}
				s.mu.Unlock()
			}
			ss.Targets = append(ss.Targets, ts)
		}
		slices.SortFunc(ss.Targets, func(a, b TargetStatus) int {
			return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.ID, b.ID), strings.Compare(a.Principal, b.Principal))
		})
		out.Streams = append(out.Streams, ss)
	}
	return out
}

// sample records the status page's charts: per stream the records dispatched per second
// and the highest target lag, per target its lag.
func (p *Player) sample(h *statuspage.History) {
	now := time.Now()
	for _, ss := range p.Status().Streams {
		h.Rate("rate/"+ss.Name, float64(ss.Current), now)
		var lag float64
		for _, t := range ss.Targets {
			lag = max(lag, t.LagSeconds)
			h.Gauge("tlag/"+ss.Name+"/"+t.ID, float64(t.LagEntries))
		}
		h.Gauge("lag/"+ss.Name, lag)
	}
}

// statusPage is the body of the player's page: per stream its state and its current
// cause, position, rows, the source position, the last error (when, whatever the state)
// and charts; per target its state, term, lag and queue.
var statusPage = statuspage.New("statecast player", `{{define "body"}}{{$h := .Hist}}
{{range .Streams}}{{$s := .}}
<h2 id="stream-{{.Name}}">stream {{.Name}}</h2>
<dl class="kv">
<dt>state</dt><dd><span class="{{streamClass .State}} state">{{.State}}</span>{{if .FetchError}} <span class="err cause">{{.FetchError}}</span>{{end}}{{if not .RetryAt.IsZero}} (tried again in {{until .RetryAt}}){{end}}</dd>
<dt>topic</dt><dd>{{.Topic}}</dd>
<dt>main position</dt><dd class="position">{{.Current}}</dd>
<dt>rows</dt><dd class="rows">{{.Rows}}</dd>
<dt>source position</dt><dd class="source-position">{{if .SourcePosition}}{{.SourcePosition}}{{else}}—{{end}}</dd>
<dt>last record</dt><dd>{{ago .LastLog}}</dd>
<dt>tombstone horizon</dt><dd>{{.Retention}}</dd>
<dt>records/s</dt><dd>{{chart (index $h.Rates .Name) "/s"}} {{num (index $h.LastRate .Name)}}</dd>
<dt>max target lag</dt><dd>{{chart (index $h.Lags .Name) "s"}} {{index $h.LastLag .Name}}</dd>
<dt>last error</dt><dd class="last-error">{{if .LastError}}{{.LastError}} (at {{.LastErrorAt.UTC.Format "2006-01-02 15:04:05Z"}}, {{ago .LastErrorAt}}){{else}}none{{end}}</dd>
</dl>
<table class="targets"><tr><th>service</th><th>instance</th><th>principal</th><th>views</th><th>state</th><th>term</th><th>last ack</th><th>lag (entries)</th><th>lag</th><th>lag history</th><th>queue</th><th>unacked</th><th>recoveries</th><th>overflows</th><th>connected</th></tr>
{{range .Targets}}<tr><td>{{.Service}}</td><td>{{.ID}}</td><td>{{.Principal}}</td><td>{{.Views}}{{range $v, $sel := .Selections}}<br>{{$v}}: {{$sel}}{{end}}</td><td class="{{stateClass .State}}">{{.State}}</td><td class="num">{{.Term}}</td><td class="num">{{.LastAck}}</td><td class="num">{{.LagEntries}}</td><td class="num">{{secs .LagSeconds}}</td><td>{{chart (index $h.TargetLags (print $s.Name "/" .ID)) "entries"}}</td><td class="num">{{bytes .QueueBytes}}</td><td class="num">{{.Unacked}}</td><td class="num">{{.Recoveries}}</td><td class="num">{{.Overflows}}</td><td>{{ago .ConnectedAt}}</td></tr>
{{else}}<tr><td colspan="15">no targets</td></tr>{{end}}</table>
{{end}}{{end}}`, template.FuncMap{"stateClass": stateClass, "streamClass": streamClass, "until": until})

// streamClass colours a stream's state: ready is healthy, starting on its way, error and
// unavailable are not served.
func streamClass(state string) string {
	switch state {
	case StreamReady:
		return "ok"
	case StreamStarting:
		return "warn"
	default:
		return "bad"
	}
}

// until formats the time left until t.
func until(t time.Time) string { return statuspage.Duration(max(0, time.Until(t))) }

// stateClass colours a target's queue state: N is healthy, recovering states are on their
// way, S is suspended.
func stateClass(state string) string {
	switch state {
	case "N":
		return "ok"
	case "S":
		return "bad"
	default:
		return "warn"
	}
}

// pageHistory is what the page's charts read of the history, keyed by stream (and
// stream/target).
type pageHistory struct {
	Rates, Lags, TargetLags map[string][]float64
	LastRate                map[string]float64
	LastLag                 map[string]string
}

// StatusHandler serves the status page: Status as JSON, or as an HTML page for a browser.
// The rule is every status page's (the distributor's, a cache's): a request gets HTML only
// when its Accept header names text/html and not application/json and its path does not
// end in ".json"; anything else (a path ending in ".json", Accept: application/json, curl's
// */*, no Accept header) gets JSON. The page's charts sample the player every few seconds
// from the first call on, until the player is closed.
func (p *Player) StatusHandler() http.Handler {
	p.hist.Start(p.ctx.Done(), p.sample)
	return statuspage.Handler(statusPage, p.started, p.Status, p.pageData)
}

// pageData is what the HTML page shows of st: the streams and their charts.
func (p *Player) pageData(st Status) any {
	ph := pageHistory{Rates: map[string][]float64{}, Lags: map[string][]float64{}, TargetLags: map[string][]float64{},
		LastRate: map[string]float64{}, LastLag: map[string]string{}}
	for _, ss := range st.Streams {
		ph.Rates[ss.Name] = p.hist.Values("rate/" + ss.Name)
		if r := ph.Rates[ss.Name]; len(r) > 0 {
			ph.LastRate[ss.Name] = r[len(r)-1]
		}
		ph.Lags[ss.Name] = p.hist.Values("lag/" + ss.Name)
		var lag float64
		for _, t := range ss.Targets {
			lag = max(lag, t.LagSeconds)
			ph.TargetLags[ss.Name+"/"+t.ID] = p.hist.Values("tlag/" + ss.Name + "/" + t.ID)
		}
		ph.LastLag[ss.Name] = statuspage.Duration(time.Duration(lag * float64(time.Second)))
	}
	return struct {
		Streams []StreamStatus
		Hist    pageHistory
	}{st.Streams, ph}
}
