package player

import (
	"cmp"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Status is a point-in-time view of the player (the status page and the metrics).
type Status struct {
	Streams []StreamStatus `json:"streams"`
}

// StreamStatus describes one stream.
type StreamStatus struct {
	Name    string `json:"name"`
	Topic   string `json:"topic"`
	Ready   bool   `json:"ready"`
	Current int64  `json:"current"`
	Rows    int    `json:"rows"`
	// SourcePosition is the source position of the latest position record read (the LSN
	// text, "" when none was read or the stream has none: polling).
	SourcePosition string         `json:"source_position,omitempty"`
	LastLog        time.Time      `json:"last_log_time"`
	Retention      string         `json:"tombstone_horizon"`
	FetchError     string         `json:"fetch_error,omitempty"`
	Targets        []TargetStatus `json:"targets"`
}

// TargetStatus describes one connected target.
type TargetStatus struct {
	// ID is the instance id (Hello.client_id); Service its service; Principal who it
	// authenticated as ("" anonymous).
	ID          string    `json:"id"`
	Service     string    `json:"service"`
	Principal   string    `json:"principal,omitempty"`
	Views       []string  `json:"views"`
	State       string    `json:"state"`
	Term        uint64    `json:"term"`
	LastAck     int64     `json:"last_ack"`
	SentUpTo    int64     `json:"sent_up_to"`
	LagEntries  int64     `json:"lag_entries"`
	LagSeconds  float64   `json:"lag_seconds"` // age of the oldest unacknowledged record
	QueueBytes  int64     `json:"queue_bytes"`
	Normal      int       `json:"normal_len"`
	Catchup     int       `json:"catchup_len"`
	Unacked     int       `json:"unacked_batches"`
	Recoveries  int       `json:"recoveries"`
	Overflows   int       `json:"overflows"`
	ConnectedAt time.Time `json:"connected_at"`
}

// Status returns the current status of every stream and target.
func (p *Player) Status() Status {
	var out Status
	for _, name := range p.streamNames {
		s := p.streams[name]
		ss := StreamStatus{Name: name, Topic: s.cfg.Topic, Current: s.current.Load(), Retention: s.retention.String()}
		select {
		case <-s.ready:
			ss.Ready = true
		default:
		}
		s.mu.Lock()
		ss.Rows, ss.LastLog, ss.FetchError, ss.SourcePosition = s.nrows, s.lastLog, s.fetchErr, s.posLSN
		s.mu.Unlock()
		for _, t := range s.targetsSnapshot() {
			t.mu.Lock()
			ts := TargetStatus{
				ID: t.id, Service: t.service, Principal: t.principal.Name, Views: t.viewList, State: t.q.state.String(), Term: t.q.term,
				LastAck: t.lastAck, SentUpTo: t.sentUpTo, QueueBytes: t.q.queuedBytes() + t.q.poppedBytes,
				Normal: t.q.normal.len(), Catchup: t.q.catchup.len(), Unacked: len(t.q.popped),
				Recoveries: t.recoveries, Overflows: t.overflows, ConnectedAt: t.connected,
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

var statusPage = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><title>statecast player</title>
<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}table{border-collapse:collapse}tr:nth-child(even){background:#eee}</style>
</head><body><h1>statecast player</h1>
{{range .Streams}}
<h2>stream {{.Name}} (topic {{.Topic}})</h2>
<p>ready: {{.Ready}} · main position: {{.Current}} · rows: {{.Rows}} {{if .SourcePosition}}· source position: {{.SourcePosition}} {{end}}· last log time: {{.LastLog}} · tombstone horizon: {{.Retention}} {{if .FetchError}}· <b>fetch error: {{.FetchError}}</b>{{end}}</p>
<table><tr><th>service</th><th>instance</th><th>principal</th><th>views</th><th>state</th><th>term</th><th>last ack</th><th>sent</th><th>lag</th><th>lag s</th><th>queue bytes</th><th>normal</th><th>catch-up</th><th>unacked</th><th>recoveries</th><th>overflows</th></tr>
{{range .Targets}}<tr><td>{{.Service}}</td><td>{{.ID}}</td><td>{{.Principal}}</td><td>{{.Views}}</td><td>{{.State}}</td><td>{{.Term}}</td><td>{{.LastAck}}</td><td>{{.SentUpTo}}</td><td>{{.LagEntries}}</td><td>{{printf "%.1f" .LagSeconds}}</td><td>{{.QueueBytes}}</td><td>{{.Normal}}</td><td>{{.Catchup}}</td><td>{{.Unacked}}</td><td>{{.Recoveries}}</td><td>{{.Overflows}}</td></tr>
{{end}}</table>
{{end}}
</body></html>`))

// StatusHandler serves the status page: JSON at any path ending in ".json" or with
// "Accept: application/json", HTML otherwise.
func (p *Player) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := p.Status()
		if strings.HasSuffix(r.URL.Path, ".json") || strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(st)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = statusPage.Execute(w, st)
	})
}
