package distributor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// A cycle whose changes reach a large share of a mapped view's rows — an UPDATE of a
// whole table, a migration, a parent of many children re-parented — reads the view
// whole instead, in one sequential read in the cycle's snapshot, and streams the rows
// whose content hash changed (and the tombstones of the keys that vanished) to the
// producer as it reads them, inside the cycle's Kafka transaction.
//
// Why whole: past a share of the rows, reading them by key through an index costs more
// than reading them all in order; and what the mapped read holds per row until it
// publishes (the row's value, its key in several sets, the changed values) made such a
// cycle need several times the memory of the view's own state. Why streamed: a snapshot
// epoch holds its rows to validate the whole view before its first record is sent, which
// a cycle need not do — its records are one Kafka transaction, so a row that stops the
// view (a bad value, an SQL error) aborts the transaction and nothing of it is ever read;
// the cycle is then taken again without the view (errCycleAgain). What the read keeps
// until the broker acknowledged is the view's new state: key → hash (the keys in shared
// chunks) and, for a view with reverse maps, those maps.
//
// The records are the view's changed rows, as a mapped read publishes them (not an
// epoch): the caches apply them with the cycle's other records at its position record.
//
// A cycle that is still being sent after half the transaction timeout is committed in
// parts (producer.publish); at the read rates measured (capture-bulk, in
// docs/benchmarks/distributor-history.md) that is a cycle of tens of millions of rows.
// Its first parts are then readable before its position record: caches still apply it
// at that record, but a bad row or a crash after a part was committed leaves that part's
// rows in the topic, without the rest.

// bulkShare: a mapped view whose changes in one cycle reach more rows than this share of
// its published rows is read whole (capture-bulk -share measured the crossing: see
// docs/benchmarks/distributor-history.md).
var bulkShare = 0.15

// bulkMinRows: a view with fewer published rows than this always takes the mapped read:
// a small view costs little either way.
var bulkMinRows = 10_000

// errBulk: the cycle's changes reach so many of the view's rows that it is read whole.
var errBulk = errors.New("distributor: the changes reach a large share of the view's rows: read whole")

// errCycleAgain: a view stopped while the cycle was sent (its Kafka transaction aborted):
// the cycle is taken again, without it.
var errCycleAgain = errors.New("distributor: a view stopped while the cycle was sent; taking the cycle again")

// bulkLimit is how many changed rows of v a cycle reads by its mapping.
func bulkLimit(st *viewState) int {
	if len(st.hashes) < bulkMinRows {
		return -1 // no limit
	}
	return int(bulkShare * float64(len(st.hashes)))
}

// bulkBatch is how many records the reading goroutine hands to the producer at a time;
// bulkAhead how many batches it may read ahead: what a streamed read holds beyond the
// producer's own pipeline.
const (
	bulkBatch = 512
	bulkAhead = 4
)

// bulkRead is a streamed whole read of a view in a cycle: a part's next. A goroutine
// reads and encodes the rows (the snapshot's connection is its own until it returns)
// while the publisher loop feeds the producer, so the read and the sends overlap.
type bulkRead struct {
	ctx   context.Context
	w     *walSession
	st    *viewState
	tx    pgx.Tx
	hdrs  []sarama.RecordHeader
	out   chan bulkItem
	quit  chan struct{}
	done  chan struct{} // closed when the goroutine returned
	batch []*sarama.ProducerMessage
	ended bool
	// Set by the goroutine, read once out is closed: the view's new state, and the
	// changed rows and tombstones it sent.
	hashes           map[string]uint64
	deps             []*depMap
	published, tombs int64
	took             time.Duration // from the query to the read's end (sends included)
}

// bulkItem is a batch of records, or the error that ends the read.
type bulkItem struct {
	msgs []*sarama.ProducerMessage
	err  error
}

// bulkOut adds to t a streamed whole read of v in tx: its changed rows and tombstones,
// and the view's new state once the broker acknowledged them. The caller closes the read
// (bulkRead.close) before tx ends.
func (w *walSession) bulkOut(ctx context.Context, tx pgx.Tx, v *walView, src source, t *txnOut) *bulkRead {
	s, st := w.s, v.st
	meta := record.Meta{View: st.cfg.Name, Kind: record.KindRow, Txn: true, Epoch: st.epoch, SourceTime: src.time, SourceLSN: src.lsn}
	b := &bulkRead{ctx: ctx, w: w, st: st, tx: tx, hdrs: recordsarama.Headers(meta)}
	t.body = append(t.body, part{next: b.next})
	t.done = append(t.done, func() {
		st.hashes = b.hashes
		if len(st.depSpecs) > 0 {
			st.deps = b.deps
		}
		s.m.rows.WithLabelValues(s.cfg.Topic, st.cfg.Name).Add(float64(b.published))
		s.m.tombstones.WithLabelValues(s.cfg.Topic, st.cfg.Name).Add(float64(b.tombs))
		s.m.rereads.WithLabelValues(s.cfg.Topic, st.cfg.Name, fullBulk.String()).Inc()
		s.m.viewRead.WithLabelValues(s.cfg.Topic, st.cfg.Name).Add(b.took.Seconds())
	})
	return b
}

// next returns the next record to publish: the changed rows, then the tombstones; nil
// at the end. A row that stops the view ends the read with its *ViewError. The query
// starts at the first call, when the producer reaches the part.
func (b *bulkRead) next() (*sarama.ProducerMessage, error) {
	if b.out == nil {
		if err := b.start(); err != nil {
			b.ended = true
			return nil, err
		}
	}
	for len(b.batch) == 0 {
		if b.ended {
			return nil, nil
		}
		it, ok := <-b.out
		if !ok {
			b.ended = true
			return nil, nil
		}
		if it.err != nil {
			b.ended = true
			return nil, it.err
		}
		b.batch = it.msgs
	}
	m := b.batch[0]
	b.batch = b.batch[1:]
	return m, nil
}

// start runs the view's query and the goroutine that reads it.
func (b *bulkRead) start() error {
	st, s := b.st, b.w.s
	started := time.Now()
	b.out, b.quit, b.done = make(chan bulkItem, bulkAhead), make(chan struct{}), make(chan struct{})
	rows, err := b.tx.Query(b.ctx, st.cfg.SQL, pgjson.ResultFormats)
	if err != nil {
		close(b.done)
		return sqlError(st.cfg, err)
	}
	if !sameColumns(st.enc, rows.FieldDescriptions()) {
		rows.Close()
		close(b.done)
		st.enc = nil
		return fmt.Errorf("distributor: view %q: %w; retrying", st.cfg.Name, capture.ErrColumnsChanged)
	}
	codec := newRowCodec(st.cfg, st.enc, s.cfg.maxBytes, headerBytes(st.cfg.Name)+recordOverhead)
	codec.keyArena = true // the keys become the view's state
	b.hashes = make(map[string]uint64, len(st.hashes))
	for _, d := range st.depSpecs {
		b.deps = append(b.deps, newDepMap(d.cols))
	}
	prog := s.startProgress(st.cfg.Name, fullBulk.phase())
	prog.expect(int64(len(st.hashes)))
	go func() {
		defer close(b.done)
		defer close(b.out)
		defer prog.end()
		defer rows.Close()
		if err := b.read(rows, codec, prog); err != nil {
			b.send(bulkItem{err: err})
		}
		b.took = time.Since(started)
	}()
	return nil
}

// read reads rows and sends the records to publish, in batches; false from send (the
// read was closed) ends it.
func (b *bulkRead) read(rows pgx.Rows, codec *rowCodec, prog *progress) error {
	st := b.st
	name := st.cfg.Name
	hdr := headerBytes(name)
	batch := make([]*sarama.ProducerMessage, 0, bulkBatch)
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		ok := b.send(bulkItem{msgs: batch})
		batch = make([]*sarama.ProducerMessage, 0, bulkBatch)
		return ok
	}
	for rows.Next() {
		prog.row()
		raw := rows.RawValues()
		key, value, err := codec.encode(raw)
		if err != nil {
			return err
		}
		if n := len(key) + len(value) + hdr + recordOverhead; n > codec.maxBytes {
			return &ViewError{View: name, Key: key, Err: fmt.Errorf("record of %d bytes exceeds the broker's message limit of %d bytes", n, codec.maxBytes)}
		}
		h := record.RowHash(codec.keyBuf, value)
		before := len(b.hashes)
		b.hashes[key] = h
		if len(b.hashes) == before {
			return &ViewError{View: name, Key: key, Err: errors.New("duplicate key in one snapshot (key columns must be unique in the view)")}
		}
		for _, m := range b.deps {
			m.set(key, m.identity(raw))
		}
		if old, ok := st.hashes[key]; ok && old == h {
			continue
		}
		b.published++
		batch = append(batch, &sarama.ProducerMessage{Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value), Headers: b.hdrs})
		if len(batch) == bulkBatch && !flush() {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return sqlError(st.cfg, err)
	}
	for k := range st.hashes {
		if _, ok := b.hashes[k]; ok {
			continue
		}
		b.tombs++
		batch = append(batch, &sarama.ProducerMessage{Key: sarama.StringEncoder(k), Headers: b.hdrs})
		if len(batch) == bulkBatch && !flush() {
			return nil
		}
	}
	flush()
	return nil
}

// send hands it to next; false when the read was closed first.
func (b *bulkRead) send(it bulkItem) bool {
	select {
	case b.out <- it:
		return true
	case <-b.quit:
		return false
	}
}

// close stops the goroutine, if it runs, and waits for it: the snapshot's connection is
// free again.
func (b *bulkRead) close() {
	if b.out == nil {
		return
	}
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}
