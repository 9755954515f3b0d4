package distributor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
)

// source identifies the database snapshot a read ran in (stamped on the records).
type source struct {
	lsn  string
	time time.Time
}

// beginSnapshot opens a REPEATABLE READ, READ ONLY transaction and captures the WAL
// position and time at the start of its snapshot (its first statement).
func beginSnapshot(ctx context.Context, db querier) (pgx.Tx, source, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, source{}, fmt.Errorf("distributor: begin snapshot: %w", err)
	}
	var src source
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, now()").Scan(&src.lsn, &src.time); err != nil {
		_ = tx.Rollback(ctx)
		return nil, source{}, fmt.Errorf("distributor: snapshot position: %w", err)
	}
	return tx, src, nil
}

// querier is what the distributor needs from a pgxpool.Pool.
type querier interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// pendingRow is a record to publish: value nil is a tombstone.
type pendingRow struct {
	key   string
	value []byte
	hash  uint64
}

// viewRead is the validated result of reading a view: what to publish and, for a full
// read, the view's complete new state.
type viewRead struct {
	view    *viewState
	full    bool
	publish []pendingRow      // rows to publish (changed, missing, or all for rewrite), then tombstones
	hashes  map[string]uint64 // full read: key → hash of every row; poll: changed rows only
	sum     record.EpochHash  // full read: the epoch hash of the whole view
	rows    int64             // rows read
	tombs   int64             // tombstones in publish
	maxInc  string            // highest incremental key text seen ("" = none)
	src     source
	// streamed: a full read whose rows to publish were validated and hashed but not kept
	// (pass 1); publishEpoch re-reads them from tx, the same snapshot, while it sends
	// (pass 2). publish then holds only the tombstones.
	streamed  bool
	tx        pgx.Tx
	rewrite   bool
	toPublish int64 // rows (not tombstones) to publish
	maxBytes  int   // record size limit and header bytes (pass 2 re-checks volatile rows)
	hdrBytes  int
	// seq and pub, for a streamed read: the hash of the i-th row read and whether it is to
	// be published (bit i). Pass 2 checks its i-th row against them (no map lookups) and
	// falls back to the maps when the order differs (a synchronized seq scan may start
	// elsewhere in the table).
	seq []uint64
	pub []uint64
}

// twoPass makes full reads (epochs) two-pass: validate and hash first, then re-read and
// send while reading. false (the default) = one pass: every row to publish is buffered
// (≈ 250 MB for 1 M rows of 200 bytes) and sent once the whole view was validated.
// BenchmarkSnapshot measures both in the same run: on the shared 2-core machine the second
// read costs more CPU than the overlap saves (docs/BENCHMARKS.md, distributor library section), so
// two-pass is not the default; the tests run both (forDesigns).
var twoPass = false

// readView runs the view's query in tx and validates every row before anything is
// published: key columns exist, keys are neither NULL nor duplicated, every column type is
// mapped and no record exceeds maxBytes. A full read (an epoch) also lists the keys that
// vanished (tombstones); rewrite publishes every row. A poll reads only the rows above the
// watermark − overlap. Nothing in st changes.
func readView(ctx context.Context, tx pgx.Tx, st *viewState, full, rewrite bool, src source, maxBytes int, hdrBytes int) (*viewRead, error) {
	v := st.cfg
	query, args := v.SQL, []any(nil)
	if full || st.enc == nil {
		enc, err := compileEncoder(ctx, tx, v, query)
		if err != nil {
			return nil, err
		}
		st.enc = enc // type facts only; not publication state
	}
	codec := newRowCodec(v, st.enc)
	streamed := full && twoPass
	codec.scratch = streamed
	codec.keyArena = full
	if codec.inc >= 0 {
		if err := checkIncremental(v, codec.incOID); err != nil {
			return nil, err
		}
		st.incType = codec.incOID
	}
	if !full {
		query, args = pollQuery(v, st.incType, st.watermark)
	}
	size := len(st.hashes)
	if full && size == 0 {
		size = estimateRows(ctx, tx, v.SQL) // before the query: one statement at a time
	}
	rows, err := tx.Query(ctx, query, append([]any{pgjson.ResultFormats}, args...)...)
	if err != nil {
		return nil, sqlError(v, err)
	}
	defer rows.Close()
	if !sameColumns(st.enc, rows.FieldDescriptions()) {
		st.enc = nil
		return nil, fmt.Errorf("distributor: view %q: the query's columns changed; retrying", v.Name)
	}
	r := &viewRead{view: st, full: full, src: src, hashes: make(map[string]uint64),
		streamed: streamed, rewrite: rewrite, maxBytes: maxBytes, hdrBytes: hdrBytes}
	if streamed {
		r.tx = tx
	}
	if full {
		r.hashes = make(map[string]uint64, size)
		if !streamed && (rewrite || len(st.hashes) == 0) {
			r.publish = make([]pendingRow, 0, size) // every row is published
		}
	}
	inc := incMax{c: codec}
	for rows.Next() {
		raw := rows.RawValues()
		key, value, err := codec.encode(raw)
		if err != nil {
			return nil, err
		}
		if err := inc.add(raw); err != nil {
			return nil, err
		}
		if n := len(key) + len(value) + hdrBytes + recordOverhead; n > maxBytes {
			return nil, &ViewError{View: v.Name, Key: key, Err: fmt.Errorf("record of %d bytes exceeds the broker's message limit of %d bytes", n, maxBytes)}
		}
		h := record.RowHash(codec.keyBuf, value)
		before := len(r.hashes)
		r.hashes[key] = h // one map operation: a duplicate key does not grow the map
		if len(r.hashes) == before {
			return nil, &ViewError{View: v.Name, Key: key, Err: errors.New("duplicate key in one snapshot (key columns must be unique in the view)")}
		}
		r.rows++
		if full {
			r.sum.Add(h)
		}
		if streamed {
			r.seq = append(r.seq, h)
			if len(r.seq) > len(r.pub)*64 {
				r.pub = append(r.pub, 0)
			}
		}
		if needsPublish(st.hashes, key, h, rewrite) {
			r.toPublish++
			if streamed {
				i := len(r.seq) - 1
				r.pub[i/64] |= 1 << (i % 64)
			} else {
				r.publish = append(r.publish, pendingRow{key: key, value: value, hash: h})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(v, err)
	}
	if r.maxInc, err = inc.value(); err != nil {
		return nil, err
	}
	if !full {
		// a poll keeps only the changed rows' hashes
		for k := range r.hashes {
			if old, ok := st.hashes[k]; ok && old == r.hashes[k] {
				delete(r.hashes, k)
			}
		}
		return r, nil
	}
	for k := range st.hashes {
		if _, ok := r.hashes[k]; !ok {
			r.publish = append(r.publish, pendingRow{key: k})
			r.tombs++
		}
	}
	return r, nil
}

// needsPublish reports whether a row of hash h must be published over the view's state.
func needsPublish(hashes map[string]uint64, key string, h uint64, rewrite bool) bool {
	if rewrite || len(hashes) == 0 {
		return true
	}
	old, ok := hashes[key]
	return !ok || old != h
}

// streamRows is pass 2 of a streamed read: it re-runs the view's query in r.tx (the same
// REPEATABLE READ snapshot as pass 1) and returns an iterator over the row records to
// publish, encoded while the producer sends the previous ones. Every row is checked against
// pass 1 (its i-th hash, else the key → hash map). A volatile value (random(),
// clock_timestamp()) is published as pass 2 reads it, after a size check, and replaces pass
// 1's hash; a key pass 1 did not see, or a different row count or set hash, fails here,
// mid-epoch: the epoch then has no end. close must be called.
func streamRows(ctx context.Context, r *viewRead, hdrs []sarama.RecordHeader) (next func() (*sarama.ProducerMessage, error), close func() error, err error) {
	st := r.view
	v := st.cfg
	rows, err := r.tx.Query(ctx, v.SQL, pgjson.ResultFormats)
	if err != nil {
		return nil, nil, sqlError(v, err)
	}
	if !sameColumns(st.enc, rows.FieldDescriptions()) {
		rows.Close()
		return nil, nil, fmt.Errorf("distributor: view %q: the query's columns changed between the two reads of one snapshot", v.Name)
	}
	codec := newRowCodec(v, st.enc)
	var n, sent int64
	var sum record.EpochHash
	next = func() (*sarama.ProducerMessage, error) {
		for rows.Next() {
			key, value, err := codec.encodeStable(rows.RawValues())
			if err != nil {
				return nil, err
			}
			i := n
			n++
			h := record.RowHash(key, value)
			sum.Add(h)
			var publish bool
			if i < int64(len(r.seq)) && r.seq[i] == h { // same row as pass 1's i-th
				publish = r.pub[i/64]&(1<<(i%64)) != 0
			} else {
				old, ok := r.hashes[string(key)]
				if !ok {
					return nil, &ViewError{View: v.Name, Key: string(key), Err: errors.New("key not in the first read of the same snapshot (volatile key columns?)")}
				}
				if old != h {
					// a volatile value (random(), clock_timestamp(), …): what this read gives is
					// what is published and remembered, after pass 1's size check
					if sz := len(key) + len(value) + r.hdrBytes + recordOverhead; sz > r.maxBytes {
						return nil, &ViewError{View: v.Name, Key: string(key), Err: fmt.Errorf("record of %d bytes exceeds the broker's message limit of %d bytes", sz, r.maxBytes)}
					}
					r.hashes[string(key)] = h
					r.sum.Replace(old, h)
				}
				publish = needsPublish(st.hashes, string(key), h, r.rewrite)
			}
			if !publish {
				continue
			}
			sent++
			return &sarama.ProducerMessage{Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value), Headers: hdrs}, nil
		}
		if err := rows.Err(); err != nil {
			return nil, sqlError(v, err)
		}
		if n != r.rows || sum.Sum() != r.sum.Sum() {
			return nil, &ViewError{View: v.Name, Err: fmt.Errorf("second read of the snapshot differs from the first: %d rows (hash %s), the first %d (%s)",
				n, record.FormatHash(sum.Sum()), r.rows, record.FormatHash(r.sum.Sum()))}
		}
		r.toPublish = sent
		return nil, nil
	}
	return next, func() error { rows.Close(); return rows.Err() }, nil
}

// recordOverhead bounds the bytes Kafka adds around one record's key, value and headers
// (record batch header and record framing).
const recordOverhead = 128

func sqlError(v *ViewConfig, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &ViewError{View: v.Name, Err: fmt.Errorf("sql: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)}
	}
	return fmt.Errorf("distributor: view %q: query: %w", v.Name, err)
}
