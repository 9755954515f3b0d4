package distributor

import (
	"context"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// txnOut is one source transaction of the stream (schemas/README.md): the records of one
// read of the database — an epoch, a poll, the rows changed by a prefix of the WAL's
// commits — each with sc-txn, ended by a position record; and the changes of the stream's
// state that wait for the broker's acknowledgement.
//
// It is sent as one Kafka transaction: the body (epoch begins, rows, tombstones), the tail
// (epoch ends, poll records) and the position record, in one pipeline. A record that says
// "what came before is complete" (an epoch end, a position record) needs no wait for the
// acknowledgement of what precedes it: if a batch fails, the whole transaction is aborted
// and none of it is ever read.
type txnOut struct {
	body []part
	tail []part
	pos  record.Position
	done []func() // state changes, run in order once everything is acknowledged
}

// part is n records made on demand (a large epoch holds no sarama message per row), or,
// when next is set, the records next makes while the transaction is sent, until it
// returns nil: a read streamed to the producer (wal_bulk.go), which holds no more of its
// rows than the producer's pipeline does. An error of next aborts the transaction.
type part struct {
	n    int
	gen  func(i int) *sarama.ProducerMessage
	next func() (*sarama.ProducerMessage, error)
}

// rowsPart is the row records of rows (value nil = tombstone) with meta's headers.
func rowsPart(rows []pendingRow, meta record.Meta) part {
	meta.Kind = record.KindRow
	meta.Txn = true
	hdrs := recordsarama.Headers(meta) // shared, read-only
	return part{n: len(rows), gen: func(i int) *sarama.ProducerMessage {
		m := &sarama.ProducerMessage{Key: sarama.StringEncoder(rows[i].key), Headers: hdrs}
		if rows[i].value != nil {
			m.Value = sarama.ByteEncoder(rows[i].value)
		}
		return m
	}}
}

// controlPart is the control records cs of view (or of the stream) with meta's headers.
func controlPart(view string, meta record.Meta, cs ...record.Control) part {
	msgs := make([]*sarama.ProducerMessage, 0, len(cs))
	for _, c := range cs {
		meta.Kind = c.Kind()
		meta.View = view
		if c.Kind().IsStream() {
			meta.View = ""
		}
		meta.Txn = c.Kind() != record.KindPosition
		msgs = append(msgs, &sarama.ProducerMessage{
			Key:     sarama.ByteEncoder(record.ControlKey(view, c.Kind())),
			Value:   sarama.ByteEncoder(c.Marshal()),
			Headers: recordsarama.Headers(meta),
		})
	}
	return part{n: len(msgs), gen: func(i int) *sarama.ProducerMessage { return msgs[i] }}
}

// publishTxn sends t as one Kafka transaction (producer.publish) and, once the broker
// committed it, applies its state changes. On an error the transaction is aborted and
// nothing of t's state is applied: no record of t is visible, and the retry publishes it
// again.
func (s *stream) publishTxn(ctx context.Context, t *txnOut) error {
	meta := record.Meta{Kind: record.KindPosition, SourceTime: t.pos.Time, SourceLSN: t.pos.LSN}
	parts := make([]part, 0, len(t.body)+len(t.tail)+1)
	parts = append(append(append(parts, t.body...), t.tail...), controlPart("", meta, &t.pos))
	if err := s.prod.publish(ctx, parts); err != nil {
		return err
	}
	for _, f := range t.done {
		f()
	}
	return nil
}

// epochOut adds r, a full read, to t as a new epoch of its view in mode: the epoch
// begin, the rows and tombstones in the body, the epoch end (and, for a polled view, a
// poll record with the epoch's watermark) in the tail; the view's state changes in done.
func (s *stream) epochOut(t *txnOut, r *viewRead, mode string) {
	st := r.view
	name := st.cfg.Name
	st.epoch++ // used even if the epoch fails: a later epoch never reuses its number
	epoch := st.epoch
	meta := record.Meta{View: name, Epoch: epoch, SourceTime: r.src.time, SourceLSN: r.src.lsn}
	def := viewDef(st, st.enc)
	t.body = append(t.body,
		controlPart(name, meta, &record.EpochBegin{Epoch: epoch, Mode: mode, SourceLSN: r.src.lsn, SourceTime: r.src.time, Def: def}),
		rowsPart(r.publish, meta))
	published := r.published()
	controls := []record.Control{&record.EpochEnd{Epoch: epoch, Rows: r.sum.Rows(), Hash: r.sum.Sum(),
		Published: published, Tombstones: r.tombs, SourceLSN: r.src.lsn, Def: def}}
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
	t.tail = append(t.tail, controlPart(name, meta, controls...))
	start := time.Now()
	t.done = append(t.done, func() {
		st.hashes = r.hashes
		if r.deps != nil {
			st.deps = r.deps
		}
		st.ended, st.def = epoch, def
		s.setWatermark(st, wm)
		s.setViewStatus(st)
		s.m.rows.WithLabelValues(s.cfg.Topic, name).Add(float64(published))
		s.m.tombstones.WithLabelValues(s.cfg.Topic, name).Add(float64(r.tombs))
		s.m.epoch.WithLabelValues(s.cfg.Topic, name).Set(float64(epoch))
		s.m.epochTime.WithLabelValues(s.cfg.Topic, name).Observe(time.Since(r.started).Seconds())
		if st.polled() {
			s.noteBeyond(st, r)
			s.noteNulls(st, r)
		}
		s.log.Info("epoch published", "stream", s.cfg.Topic, "view", name, "epoch", epoch, "mode", mode,
			"rows", r.sum.Rows(), "published", published, "tombstones", r.tombs,
			"hash", record.FormatHash(r.sum.Sum()), "source_lsn", r.src.lsn, "duration", time.Since(start))
	})
}

// pollOut adds the changed rows of a poll to t, then a poll record; the watermark and
// hashes advance in done.
func (s *stream) pollOut(t *txnOut, r *viewRead) {
	st := r.view
	name := st.cfg.Name
	meta := record.Meta{View: name, Epoch: st.epoch, SourceTime: r.src.time, SourceLSN: r.src.lsn}
	wm := maxWatermark(st.incType, st.watermark, r.maxInc)
	t.body = append(t.body, rowsPart(r.publish, meta))
	t.tail = append(t.tail, controlPart(name, meta, &record.Poll{Watermark: wm, SourceLSN: r.src.lsn, SourceTime: r.src.time}))
	t.done = append(t.done, func() {
		for k, h := range r.hashes {
			st.hashes[k] = h
		}
		s.setWatermark(st, wm)
		s.m.rows.WithLabelValues(s.cfg.Topic, name).Add(float64(len(r.publish)))
		s.noteBeyond(st, r)
		if len(r.publish) > 0 {
			s.log.Debug("poll published", "stream", s.cfg.Topic, "view", name, "rows", len(r.publish), "watermark", wm)
		}
	})
}

// headerBytes bounds the bytes of the sc-* headers of a record of view.
func headerBytes(view string) int {
	return len(record.HeaderView) + len(view) +
		len(record.HeaderKind) + len(record.KindEpochBegin) +
		len(record.HeaderEpoch) + 20 +
		len(record.HeaderSourceTime) + 40 +
		len(record.HeaderSourceLSN) + 24 +
		len(record.HeaderTxn) + 1 +
		6*4 // varint lengths
}
