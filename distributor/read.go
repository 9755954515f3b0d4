package distributor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
)

// source identifies the database snapshot a read ran in (stamped on the records).
type source struct {
	lsn  string
	time time.Time
	// clock bounds the incremental values a read may take as its watermark. It is taken
	// in the statement that takes the snapshot, not at BEGIN (now()): a transaction that
	// commits between the two is visible, and its values must not count as future.
	clock dbClock
}

// beginSnapshot opens a REPEATABLE READ, READ ONLY transaction (a polling stream's read)
// and captures the time and clock at the start of its snapshot (its first statement).
func beginSnapshot(ctx context.Context, db querier) (pgx.Tx, source, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, source{}, fmt.Errorf("distributor: begin snapshot: %w", err)
	}
	// No source position: a snapshot's WAL position is not one (a commit older than the
	// watermark − overlap is not in a poll; one can be written to the WAL and not visible
	// yet). Only WAL capture stamps records with a source position.
	var src source
	if err := tx.QueryRow(ctx, "SELECT now(), c, c::timestamp, c::date FROM clock_timestamp() AS c").
		Scan(&src.time, &src.clock.at, &src.clock.local, &src.clock.date); err != nil {
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
	maxInc  string            // highest incremental key text that may be the watermark ("" = none)
	src     source
	started time.Time // when the read began (an epoch's duration)
	bound   incBound  // what may be the watermark (polled views)
	// beyond counts the published rows whose incremental value is above bound; beyondKeys
	// names the first of them ("key = value") for the log.
	beyond     int64
	beyondKeys []string
	nulls      int64     // rows whose incremental value is NULL (a poll reads none of them)
	deps       []*depMap // full read of a wal view with joined tables: its new reverse maps
}

// maxBeyondKeys bounds the keys one read names in its log line.
const maxBeyondKeys = 10

// published is the number of rows (not tombstones) r publishes.
func (r *viewRead) published() int64 { return int64(len(r.publish)) - r.tombs }

// readView runs the view's query in tx and validates every row before anything is
// published: key columns exist, keys are neither NULL nor duplicated, every column type is
// mapped and no record exceeds maxBytes. A full read (an epoch) also lists the keys that
// vanished (tombstones); rewrite publishes every row. A poll reads only the rows above the
// watermark − overlap. The rows to publish are kept in memory (about key + value + 40
// bytes each) so that the whole view is validated before its first record is sent. Nothing
// in st changes.
//
// prog, when not nil, counts the rows as they are read (the progress of a long read).
func readView(ctx context.Context, tx pgx.Tx, st *viewState, full, rewrite bool, src source, maxBytes int, hdrBytes int, prog *progress) (*viewRead, error) {
	started := time.Now()
	v := st.cfg
	query, args := v.SQL, []any(nil)
	if full || st.enc == nil {
		enc, err := compileEncoder(ctx, tx, v, query)
		if err != nil {
			return nil, err
		}
		st.enc = enc // type facts only; not publication state
	}
	codec := newRowCodec(v, st.enc, maxBytes, hdrBytes+recordOverhead)
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
	prog.expect(int64(size))
	rows, err := tx.Query(ctx, query, append([]any{pgjson.ResultFormats}, args...)...)
	if err != nil {
		return nil, sqlError(v, err)
	}
	defer rows.Close()
	if !sameColumns(st.enc, rows.FieldDescriptions()) {
		st.enc = nil
		return nil, fmt.Errorf("distributor: view %q: %w; retrying", v.Name, capture.ErrColumnsChanged)
	}
	r := &viewRead{view: st, full: full, src: src, hashes: make(map[string]uint64), started: started}
	if full {
		r.hashes = make(map[string]uint64, size)
		if rewrite || len(st.hashes) == 0 {
			r.publish = make([]pendingRow, 0, size) // every row is published
		}
		for _, d := range st.depSpecs {
			r.deps = append(r.deps, newDepMap(d.cols))
		}
	}
	inc := incMax{c: codec}
	if codec.inc >= 0 {
		r.bound = newIncBound(codec.incOID, rows.FieldDescriptions()[codec.inc].TypeModifier, src.clock)
		inc.bound = r.bound
	}
	for rows.Next() {
		prog.row()
		raw := rows.RawValues()
		key, value, err := codec.encode(raw)
		if err != nil {
			rows.Close()
			codec.release(ctx, capture.TxRunner{Tx: tx})
			return nil, err
		}
		beyond, err := inc.add(raw)
		if err != nil {
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
			for _, m := range r.deps {
				m.set(key, m.identity(raw))
			}
		}
		if needsPublish(st.hashes, key, h, rewrite) {
			r.publish = append(r.publish, pendingRow{key: key, value: value, hash: h})
			if beyond { // counted when published: an unchanged row re-read by every poll is not
				r.beyond++
				if len(r.beyondKeys) < maxBeyondKeys {
					b, _ := codec.enc.AppendKeyText(nil, codec.inc, raw)
					r.beyondKeys = append(r.beyondKeys, key+" = "+string(b))
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(v, err)
	}
	r.nulls = inc.nulls
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

// recordOverhead bounds the bytes Kafka adds around one record's key, value and headers
// (record batch header and record framing).
const recordOverhead = 128

// sqlError classifies an error of a view's query: an error about the view's SQL or data
// is a *ViewError; an error about the server or the connection (transientPg) is not.
func sqlError(v *ViewConfig, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !transientPg(pgErr) {
		return &ViewError{View: v.Name, Column: undefinedColumn(pgErr), Err: fmt.Errorf("sql: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)}
	}
	return fmt.Errorf("distributor: view %q: query: %w", v.Name, err)
}
