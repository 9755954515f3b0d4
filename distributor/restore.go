package distributor

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// restore reads the topic from its start to its end (the last stable offset, taken before
// reading; read_committed: aborted transactions are not part of the state) and rebuilds
// each configured view's state: key → content hash of the live rows, the last epoch, the
// definition its last complete epoch was read with (record.EpochEnd.Def: "" when unknown)
// and the watermark of the last poll record; and, into last, the last position record
// (its source position, and the views it names stale or behind: those a WAL restart must
// read in full). Records of views that are not configured any more are skipped. It is
// the only state store: no other is needed. It runs after the stream's producer was opened,
// which fenced every earlier producer and ended their transactions: what it reads is final.
// A restored watermark beyond the database clock (written by an older version) is dropped
// by the start-up epoch, which knows the column's type and the clock. prog counts the records read.
func restore(ctx context.Context, kc *KafkaConfig, topic string, views map[string]*viewState, last *record.Position, log *slog.Logger, prog *progress) (n int64, err error) {
	cfg := kc.clientConfig("-restore")
	cfg.Consumer.Fetch.Default = 4 << 20
	client, err := sarama.NewClient(kc.Brokers, cfg)
	if err != nil {
		return 0, fmt.Errorf("distributor: restore %q: %w", topic, err)
	}
	defer client.Close()
	oldest, end, err := kafkaconn.CommittedOffsets(client, topic, 0)
	if err != nil {
		return 0, fmt.Errorf("distributor: restore %q: offsets: %w", topic, err)
	}
	prog.expect(end - oldest)
	skipped := 0
	err = kafkaconn.ReadCommitted(ctx, client, topic, 0, oldest, end, func(m *sarama.ConsumerMessage) error {
		n++
		prog.row()
		if err := applyRestored(m, views, last); err != nil {
			skipped++
			if skipped <= 10 {
				log.Warn("restore: record skipped", "topic", topic, "offset", m.Offset, "err", err)
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("distributor: restore %q: %w", topic, err)
	}
	return n, nil
}

func applyRestored(m *sarama.ConsumerMessage, views map[string]*viewState, last *record.Position) error {
	var b record.MetaBuilder
	for _, h := range m.Headers {
		if err := b.Add(h.Key, h.Value); err != nil {
			return err
		}
	}
	meta, err := b.Meta()
	if err != nil {
		return err
	}
	if meta.Kind == record.KindPosition {
		p, err := record.ParsePosition(m.Value)
		if err != nil {
			return err
		}
		lsn := last.LSN
		*last = *p
		if p.LSN == "" {
			last.LSN = lsn // a poll's position record: the last source position stays
		}
		return nil
	}
	st := views[meta.View]
	if st == nil {
		return nil // a view no longer configured
	}
	st.epoch = max(st.epoch, meta.Epoch)
	switch meta.Kind {
	case record.KindRow:
		if len(m.Value) == 0 {
			delete(st.hashes, string(m.Key))
		} else {
			st.hashes[string(m.Key)] = record.RowHash(m.Key, m.Value)
		}
	case record.KindEpochEnd:
		if meta.Epoch < st.ended {
			return nil
		}
		st.ended, st.def = meta.Epoch, ""
		e, err := record.ParseEpochEnd(m.Value)
		if err != nil {
			return err // ended all the same; its definition is unknown
		}
		st.def = e.Def
	case record.KindPoll:
		p, err := record.ParsePoll(m.Value)
		if err != nil {
			return err
		}
		st.watermark = p.Watermark
	}
	return nil
}
