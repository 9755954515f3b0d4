package distributor

import (
	"net/http"
	"slices"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/internal/statuspage"
)

// StreamStatus is what Status reports of a stream.
type StreamStatus struct {
	Topic   string `json:"topic"`
	Active  bool   `json:"active"` // this process holds the stream's lock and publishes it
	Capture string `json:"capture"`
	// SourcePosition is the source position of the stream's last position record (wal).
	SourcePosition string `json:"source_position,omitempty"`
	// SlotRetainedBytes is how much WAL the stream's slot makes PostgreSQL keep (wal; the
	// last measurement, every few seconds).
	SlotRetainedBytes int64 `json:"slot_retained_bytes,omitempty"`
	// SlotBehindBytes is the capture lag (wal): the WAL from the slot's confirmed position
	// to the server's end, the last measurement.
	SlotBehindBytes int64 `json:"slot_behind_bytes,omitempty"`
	// PositionAt is when SourcePosition last moved forward (wal): an idle stream moves it
	// every position_interval, so an old time means the capture is stuck.
	PositionAt time.Time    `json:"position_at,omitzero"`
	Views      []ViewStatus `json:"views"`
}

// ViewStatus is what Status reports of a view.
type ViewStatus struct {
	Name  string `json:"name"`
	Epoch uint64 `json:"epoch"` // last epoch published
	Rows  int    `json:"rows"`  // live rows in the topic
	// Failed is why the view is stopped (its rows stay as last published), "" when not.
	Failed      string    `json:"failed,omitempty"`
	FailedSince time.Time `json:"failed_since,omitzero"`
	// Dependencies say, for a wal view, how each base table's changes reach its rows.
	Dependencies []string `json:"dependencies,omitempty"`
}

// Status reports every stream as its publisher loop last recorded it.
func (d *Distributor) Status() []StreamStatus {
	d.mu.Lock()
	streams := d.streams
	d.mu.Unlock()
	out := make([]StreamStatus, 0, len(streams))
	for _, s := range streams {
		s.statusMu.Lock()
		ss := StreamStatus{Topic: s.cfg.Topic, Active: s.active.Load(), Capture: s.cfg.Capture,
			SourcePosition: s.statusPos, SlotRetainedBytes: s.statusRetained, SlotBehindBytes: s.statusBehind, PositionAt: s.statusPosAt}
		for _, st := range s.order {
			vs := ViewStatus{Name: st.cfg.Name}
			if p := s.status[st.cfg.Name]; p != nil {
				vs = *p
				vs.Dependencies = slices.Clone(p.Dependencies)
			}
			ss.Views = append(ss.Views, vs)
		}
		s.statusMu.Unlock()
		out = append(out, ss)
	}
	return out
}

// setViewStatus records st's state for Status (called by the publisher loop).
func (s *stream) setViewStatus(st *viewState) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	if s.status == nil {
		s.status = map[string]*ViewStatus{}
	}
	vs := s.status[st.cfg.Name]
	if vs == nil {
		vs = &ViewStatus{Name: st.cfg.Name}
		s.status[st.cfg.Name] = vs
	}
	vs.Epoch, vs.Rows = st.ended, len(st.hashes)
	switch {
	case st.failed == nil:
		vs.Failed, vs.FailedSince = "", time.Time{}
	case vs.Failed == "":
		vs.Failed, vs.FailedSince = st.failed.Error(), time.Now()
	default:
		vs.Failed = st.failed.Error()
	}
}

// setDependencies records how a wal view's tables map to its rows, for Status.
func (s *stream) setDependencies(st *viewState, deps []string) {
	s.setViewStatus(st)
	s.statusMu.Lock()
	s.status[st.cfg.Name].Dependencies = deps
	s.statusMu.Unlock()
}

// setStreamStatus records the stream's source position and slot retention and lag, for
// Status ("" and negative values: unchanged).
func (s *stream) setStreamStatus(pos string, retained, behind int64) {
	s.statusMu.Lock()
	if pos != "" {
		s.statusPos, s.statusPosAt = pos, time.Now()
	}
	if retained >= 0 {
		s.statusRetained = retained
	}
	if behind >= 0 {
		s.statusBehind = behind
	}
	s.statusMu.Unlock()
}

// sample records the status page's charts: per stream the WAL published per second (the
// source position's rate), the capture lag and the slot's retention; per view its rows.
func (d *Distributor) sample(h *statuspage.History) {
	now := time.Now()
	for _, ss := range d.Status() {
		if pos, err := capture.ParseLSN(ss.SourcePosition); err == nil && ss.SourcePosition != "" {
			h.Rate("wal/"+ss.Topic, float64(pos), now)
		}
		if ss.Capture == CaptureWAL {
			h.Gauge("behind/"+ss.Topic, float64(ss.SlotBehindBytes))
			h.Gauge("retained/"+ss.Topic, float64(ss.SlotRetainedBytes))
		}
		for _, v := range ss.Views {
			h.Gauge("rows/"+v.Name, float64(v.Rows))
		}
	}
}

// statusBody is the distributor's page: per stream whether this process publishes it, the
// capture, its position and lag, the slot's retention; per view its state, epoch, rows
// and why it is stopped.
var statusBody = statuspage.New("statecast distributor", `{{define "body"}}{{$h := .Hist}}
{{range .Streams}}
<h2 id="stream-{{.Topic}}">stream {{.Topic}}</h2>
<dl class="kv">
<dt>role</dt><dd>{{if .Active}}<span class="ok role">active</span>{{else}}<span class="warn role">standby</span>{{end}}</dd>
<dt>capture</dt><dd>{{.Capture}}</dd>
{{if eq .Capture "wal"}}<dt>source position</dt><dd class="source-position">{{if .SourcePosition}}{{.SourcePosition}}{{else}}—{{end}} ({{ago .PositionAt}})</dd>
<dt>WAL published/s</dt><dd>{{chart (index $h (print "wal/" .Topic)) "B/s"}}</dd>
<dt>capture lag</dt><dd>{{chart (index $h (print "behind/" .Topic)) "B"}} {{bytes .SlotBehindBytes}} behind the server's WAL</dd>
<dt>slot retains</dt><dd>{{chart (index $h (print "retained/" .Topic)) "B"}} {{bytes .SlotRetainedBytes}}</dd>{{end}}
</dl>
<table class="views"><tr><th>view</th><th>state</th><th>epoch</th><th>rows</th><th>rows history</th><th>last error</th></tr>
{{range .Views}}<tr><td>{{.Name}}</td><td>{{if .Failed}}<span class="bad">stopped</span>{{else if .Epoch}}<span class="ok">published</span>{{else}}<span class="warn">starting</span>{{end}}</td><td class="num epoch">{{.Epoch}}</td><td class="num rows">{{.Rows}}</td><td>{{chart (index $h (print "rows/" .Name)) "rows"}}</td><td class="err">{{if .Failed}}{{.Failed}} (since {{ago .FailedSince}}){{end}}</td></tr>
{{end}}</table>
{{else}}<p>no streams</p>{{end}}{{end}}`, nil)

// statusJSON is the JSON of the status page.
type statusJSON struct {
	Streams []StreamStatus `json:"streams"`
}

// statusHandler serves the status page by the rule of every status page
// (statuspage.WantsJSON): the HTML page for a browser, {"streams": Status} as JSON to
// anything else.
func (d *Distributor) statusHandler() http.Handler {
	return statuspage.Handler(statusBody, d.started, func() statusJSON { return statusJSON{d.Status()} }, d.pageData)
}

// pageData is what the HTML page shows of st: the streams and their charts.
func (d *Distributor) pageData(st statusJSON) any {
	hist := map[string][]float64{}
	for _, ss := range st.Streams {
		for _, n := range []string{"wal/", "behind/", "retained/"} {
			hist[n+ss.Topic] = d.hist.Values(n + ss.Topic)
		}
		for _, v := range ss.Views {
			hist["rows/"+v.Name] = d.hist.Values("rows/" + v.Name)
		}
	}
	return struct {
		Streams []StreamStatus
		Hist    map[string][]float64
	}{st.Streams, hist}
}
