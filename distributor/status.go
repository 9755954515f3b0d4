package distributor

import (
	"errors"
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
	// last measurement, every health_interval, while this process is the active).
	SlotRetainedBytes int64 `json:"slot_retained_bytes,omitempty"`
	// SlotBehindBytes is the capture lag (wal): the WAL from the slot's confirmed position
	// to the server's end, the last measurement. It is measured on a connection and a
	// goroutine of its own, so it keeps growing while the capture waits for Kafka.
	SlotBehindBytes int64 `json:"slot_behind_bytes,omitempty"`
	// SlotBehindSeconds is the capture lag in time (wal): how long ago the server's WAL
	// end was at the slot's confirmed position — 0 when the slot confirmed all of it.
	SlotBehindSeconds float64 `json:"slot_behind_seconds,omitempty"`
	// SlotConfirmed is the slot's confirmed position (confirmed_flush_lsn): what the
	// distributor told PostgreSQL it published, and SlotMeasuredAt when it was read.
	SlotConfirmed  string    `json:"slot_confirmed,omitempty"`
	SlotMeasuredAt time.Time `json:"slot_measured_at,omitzero"`
	// LastError is the stream's last error (a connection, a session, the lock, a view's
	// read or publication, retried or not), LastErrorOp what failed (the op label of
	// statecast_distributor_errors_total) and LastErrorAt when; empty when none happened
	// since the start.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorOp string    `json:"last_error_op,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
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
			SourcePosition: s.statusPos, PositionAt: s.statusPosAt,
			SlotRetainedBytes: s.statusSlot.retained, SlotBehindBytes: s.statusSlot.behind, SlotBehindSeconds: s.statusSlot.behindFor.Seconds(),
			SlotMeasuredAt: s.statusSlot.at,
			LastError:      s.lastErr.msg, LastErrorOp: s.lastErr.op, LastErrorAt: s.lastErr.at}
		if s.statusSlot.confirmed != 0 {
			ss.SlotConfirmed = s.statusSlot.confirmed.String()
		}
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

// setPosition records the stream's source position, for Status.
func (s *stream) setPosition(pos string) {
	s.statusMu.Lock()
	s.statusPos, s.statusPosAt = pos, time.Now()
	s.statusMu.Unlock()
}

// lastError is a stream's last error, for Status.
type lastError struct {
	msg, op string
	at      time.Time
}

// countErr counts an error of op (of view, "" for the stream's own) in
// statecast_distributor_errors_total and records it as the stream's last error.
func (s *stream) countErr(view, op string, err error) {
	s.m.errors.WithLabelValues(s.cfg.Topic, view, op).Inc()
	if err == nil {
		return
	}
	msg := err.Error()
	if view != "" && !errors.Is(err, ErrView) { // a ViewError names its view
		msg = "view " + view + ": " + msg
	}
	s.statusMu.Lock()
	s.lastErr = lastError{msg: msg, op: op, at: time.Now()}
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
			h.Gauge("behindtime/"+ss.Topic, ss.SlotBehindSeconds)
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
<dl class="kv deps">
<dt>PostgreSQL</dt><dd class="dep-postgres">{{if .Postgres.OK}}<span class="ok">reachable</span>{{else}}<span class="bad">unreachable</span> {{.Postgres.Error}}{{end}} (since {{ago .Postgres.Since}})</dd>
<dt>Kafka</dt><dd class="dep-kafka">{{if .Kafka.OK}}<span class="ok">reachable</span>{{else}}<span class="bad">unreachable</span> {{.Kafka.Error}}{{end}} (since {{ago .Kafka.Since}})</dd>
</dl>
{{range .Streams}}
<h2 id="stream-{{.Topic}}">stream {{.Topic}}</h2>
<dl class="kv">
<dt>role</dt><dd>{{if .Active}}<span class="ok role">active</span>{{else}}<span class="warn role">standby</span>{{end}}</dd>
<dt>capture</dt><dd>{{.Capture}}</dd>
<dt>last error</dt><dd class="err last-error">{{if .LastError}}{{.LastErrorOp}}: {{.LastError}} ({{ago .LastErrorAt}}){{else}}none{{end}}</dd>
{{if eq .Capture "wal"}}<dt>source position</dt><dd class="source-position">{{if .SourcePosition}}{{.SourcePosition}}{{else}}—{{end}} ({{ago .PositionAt}})</dd>
<dt>WAL published/s</dt><dd>{{chart (index $h (print "wal/" .Topic)) "B/s"}}</dd>
<dt>capture lag</dt><dd>{{chart (index $h (print "behind/" .Topic)) "B"}} <span class="slot-behind">{{bytes .SlotBehindBytes}} behind the server's WAL, for {{secs .SlotBehindSeconds}}</span> (slot confirmed {{if .SlotConfirmed}}{{.SlotConfirmed}}{{else}}—{{end}}, measured {{ago .SlotMeasuredAt}})</dd>
<dt>time behind</dt><dd>{{chart (index $h (print "behindtime/" .Topic)) "s"}} {{secs .SlotBehindSeconds}}</dd>
<dt>slot retains</dt><dd>{{chart (index $h (print "retained/" .Topic)) "B"}} {{bytes .SlotRetainedBytes}}</dd>{{end}}
</dl>
<table class="views"><tr><th>view</th><th>state</th><th>epoch</th><th>rows</th><th>rows history</th><th>last error</th></tr>
{{range .Views}}<tr><td>{{.Name}}</td><td>{{if .Failed}}<span class="bad">stopped</span>{{else if .Epoch}}<span class="ok">published</span>{{else}}<span class="warn">starting</span>{{end}}</td><td class="num epoch">{{.Epoch}}</td><td class="num rows">{{.Rows}}</td><td>{{chart (index $h (print "rows/" .Name)) "rows"}}</td><td class="err">{{if .Failed}}{{.Failed}} (since {{ago .FailedSince}}){{end}}</td></tr>
{{end}}</table>
{{else}}<p>no streams</p>{{end}}{{end}}`, nil)

// statusJSON is the JSON of the status page: the dependencies as /readyz last checked
// them, and the streams.
type statusJSON struct {
	Postgres depState       `json:"postgres"`
	Kafka    depState       `json:"kafka"`
	Streams  []StreamStatus `json:"streams"`
}

// statusHandler serves the status page by the rule of every status page
// (statuspage.WantsJSON): the HTML page for a browser, {"streams": Status} as JSON to
// anything else.
func (d *Distributor) statusHandler() http.Handler {
	return statuspage.Handler(statusBody, d.started, d.statusJSON, d.pageData)
}

// statusJSON is what the status page shows.
func (d *Distributor) statusJSON() statusJSON {
	d.health.mu.Lock()
	st := statusJSON{Postgres: d.health.pg, Kafka: d.health.kafka}
	checked := d.health.checked
	d.health.mu.Unlock()
	if !checked {
		st.Postgres.Error, st.Kafka.Error = "not checked yet", "not checked yet"
	}
	st.Streams = d.Status()
	return st
}

// pageData is what the HTML page shows of st: the streams and their charts.
func (d *Distributor) pageData(st statusJSON) any {
	hist := map[string][]float64{}
	for _, ss := range st.Streams {
		for _, n := range []string{"wal/", "behind/", "behindtime/", "retained/"} {
			hist[n+ss.Topic] = d.hist.Values(n + ss.Topic)
		}
		for _, v := range ss.Views {
			hist["rows/"+v.Name] = d.hist.Values("rows/" + v.Name)
		}
	}
	return struct {
		Postgres, Kafka depState
		Streams         []StreamStatus
		Hist            map[string][]float64
	}{st.Postgres, st.Kafka, st.Streams, hist}
}
