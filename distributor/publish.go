package distributor

import (
	"context"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// headerBytes bounds the bytes of the five sc-* headers of a record of view.
func headerBytes(view string) int {
	return len(record.HeaderView) + len(view) +
		len(record.HeaderKind) + len(record.KindEpochBegin) +
		len(record.HeaderEpoch) + 20 +
		len(record.HeaderSourceTime) + 40 +
		len(record.HeaderSourceLSN) + 24 +
		5*4 // varint lengths
}

// sendRows publishes rows (value nil = tombstone) with the headers of meta. Messages are
// built as they are fed, so a large snapshot does not hold a sarama message per row.
func (s *stream) sendRows(ctx context.Context, rows []pendingRow, meta record.Meta) error {
	meta.Kind = record.KindRow
	hdrs := recordsarama.Headers(meta) // shared, read-only
	return s.prod.sendN(ctx, len(rows), func(i int) *sarama.ProducerMessage {
		m := &sarama.ProducerMessage{Key: sarama.StringEncoder(rows[i].key), Headers: hdrs}
		if rows[i].value != nil {
			m.Value = sarama.ByteEncoder(rows[i].value)
		}
		return m
	})
}

// sendControls publishes control records, in order, in one send.
func (s *stream) sendControls(ctx context.Context, view string, meta record.Meta, cs ...record.Control) error {
	msgs := make([]*sarama.ProducerMessage, 0, len(cs))
	for _, c := range cs {
		meta.View = view
		meta.Kind = c.Kind()
		msgs = append(msgs, &sarama.ProducerMessage{
			Key:     sarama.ByteEncoder(record.ControlKey(view, c.Kind())),
			Value:   sarama.ByteEncoder(c.Marshal()),
			Headers: recordsarama.Headers(meta),
		})
	}
	return s.prod.send(ctx, msgs)
}

// publishEpoch publishes r as a new epoch of its view: epoch-begin, the rows and tombstones,
// then (only after all of them were acknowledged) epoch-end and, for incremental views, a
// poll record with the epoch's watermark. The view's state changes only after the end was
// acknowledged; an error or a cancelled ctx leaves the epoch without an end.
func (s *stream) publishEpoch(ctx context.Context, r *viewRead, mode string) error {
	st := r.view
	name := st.cfg.Name
	start := time.Now()
	st.epoch++ // used even if the epoch fails: a later epoch never reuses its number
	meta := record.Meta{View: name, Epoch: st.epoch, SourceTime: r.src.time, SourceLSN: r.src.lsn}
	begin := &record.EpochBegin{Epoch: st.epoch, Mode: mode, SourceLSN: r.src.lsn, SourceTime: r.src.time}
	if err := s.sendControls(ctx, name, meta, begin); err != nil {
		return err
	}
	if err := s.sendRows(ctx, r.publish, meta); err != nil {
		return err
	}
	published := r.published()
	end := &record.EpochEnd{Epoch: st.epoch, Rows: r.sum.Rows(), Hash: r.sum.Sum(),
		Published: published, Tombstones: r.tombs, SourceLSN: r.src.lsn}
	controls := []record.Control{end}
	wm := st.watermark
	if st.polled() {
		if wm != "" && !r.bound.textOK(wm) {
			// A watermark past the database clock (an 'infinity', NaN or future value
			// that an older version took, restored from the topic) would keep every
			// poll empty. This epoch read every row: its own maximum is sound, as on a
			// first start.
			s.log.Warn("watermark beyond the database clock dropped; the epoch's rows set it", "stream", s.cfg.Topic,
				"view", name, "column", st.cfg.Incremental, "watermark", wm, "database_time", r.src.clock.at)
			wm = ""
		}
		wm = maxWatermark(st.incType, wm, r.maxInc)
		controls = append(controls, &record.Poll{Watermark: wm, SourceLSN: r.src.lsn, SourceTime: r.src.time})
	}
	if err := s.sendControls(ctx, name, meta, controls...); err != nil {
		return err
	}
	st.hashes = r.hashes
	st.ended = st.epoch
	s.setWatermark(st, wm)
	s.m.rows.WithLabelValues(s.cfg.Topic, name).Add(float64(published))
	s.m.tombstones.WithLabelValues(s.cfg.Topic, name).Add(float64(r.tombs))
	s.m.epoch.WithLabelValues(s.cfg.Topic, name).Set(float64(st.epoch))
	if st.polled() {
		s.noteBeyond(st, r)
		s.noteNulls(st, r)
	}
	s.log.Info("epoch published", "stream", s.cfg.Topic, "view", name, "epoch", st.epoch, "mode", mode,
		"rows", r.sum.Rows(), "published", published, "tombstones", r.tombs,
		"hash", record.FormatHash(r.sum.Sum()), "source_lsn", r.src.lsn, "duration", time.Since(start))
	return nil
}

// publishPoll publishes the changed rows of a poll, then a poll record; the watermark and
// hashes advance only after the broker acknowledged both.
func (s *stream) publishPoll(ctx context.Context, r *viewRead) error {
	st := r.view
	name := st.cfg.Name
	meta := record.Meta{View: name, Epoch: st.epoch, SourceTime: r.src.time, SourceLSN: r.src.lsn}
	if err := s.sendRows(ctx, r.publish, meta); err != nil {
		return err
	}
	wm := maxWatermark(st.incType, st.watermark, r.maxInc)
	if err := s.sendControls(ctx, name, meta, &record.Poll{Watermark: wm, SourceLSN: r.src.lsn, SourceTime: r.src.time}); err != nil {
		return err
	}
	for k, h := range r.hashes {
		st.hashes[k] = h
	}
	s.setWatermark(st, wm)
	s.m.rows.WithLabelValues(s.cfg.Topic, name).Add(float64(len(r.publish)))
	s.noteBeyond(st, r)
	if len(r.publish) > 0 {
		s.log.Debug("poll published", "stream", s.cfg.Topic, "view", name, "rows", len(r.publish), "watermark", wm)
	}
	return nil
}

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
