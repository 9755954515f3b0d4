package distributor

import (
	"slices"
	"time"
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
	SlotRetainedBytes int64        `json:"slot_retained_bytes,omitempty"`
	Views             []ViewStatus `json:"views"`
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
			SourcePosition: s.statusPos, SlotRetainedBytes: s.statusRetained}
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

// setStreamStatus records the stream's source position and slot retention, for Status.
func (s *stream) setStreamStatus(pos string, retained int64) {
	s.statusMu.Lock()
	if pos != "" {
		s.statusPos = pos
	}
	if retained >= 0 {
		s.statusRetained = retained
	}
	s.statusMu.Unlock()
}
