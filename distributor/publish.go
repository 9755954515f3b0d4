package distributor

// The polled views' watermark and its diagnostics, applied once the broker acknowledged a
// poll or an epoch (txn.go).

func (s *stream) setWatermark(st *viewState, wm string) {
	st.watermark = wm
	if wm != "" {
		s.m.watermarkT.WithLabelValues(s.cfg.Topic, st.cfg.Name).Set(watermarkSeconds(st.incType, wm))
	}
}

// maxWatermark returns the higher of a watermark and a read's maximum ("" = none).
func maxWatermark(oid uint32, wm, readMax string) string {
	if readMax != "" && (wm == "" || incLess(oid, wm, readMax)) {
		return readMax
	}
	return wm
}

// noteBeyond counts and logs the published rows of r whose incremental value did not move
// the watermark because it is beyond the database clock (future, infinity) or NaN.
func (s *stream) noteBeyond(st *viewState, r *viewRead) {
	if r.beyond == 0 {
		return
	}
	s.m.incBeyond.WithLabelValues(s.cfg.Topic, st.cfg.Name).Add(float64(r.beyond))
	s.log.Warn("incremental value beyond the database clock (future, infinity or NaN): row published, watermark not moved",
		"stream", s.cfg.Topic, "view", st.cfg.Name, "column", st.cfg.Incremental, "rows", r.beyond,
		"keys", r.beyondKeys, "database_time", r.src.clock.at, "watermark", st.watermark)
}

// noteNulls sets the count of rows whose incremental value is NULL (epochs only: a poll
// reads none of them) and logs it when it is not zero and changed.
func (s *stream) noteNulls(st *viewState, r *viewRead) {
	s.m.incNulls.WithLabelValues(s.cfg.Topic, st.cfg.Name).Set(float64(r.nulls))
	if r.nulls > 0 && r.nulls != st.nulls {
		s.log.Warn("rows with a NULL incremental value: polls never read them, only reconcile epochs publish their changes",
			"stream", s.cfg.Topic, "view", st.cfg.Name, "column", st.cfg.Incremental, "rows", r.nulls)
	}
	st.nulls = r.nulls
}
