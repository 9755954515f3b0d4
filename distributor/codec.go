package distributor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record/pgjson"
)

// The row encoding itself is schemas/record/pgjson's; this file only adapts it to a view:
// compiling the encoder of a view's query, mapping its errors to *ViewError, and keeping the
// encoded values in an arena so a snapshot does not allocate per row.

// compileEncoder describes the view's query (without running it) and compiles its encoder.
func compileEncoder(ctx context.Context, tx pgx.Tx, v *ViewConfig, query string) (*pgjson.Encoder, error) {
	sd, err := tx.Prepare(ctx, "", query)
	if err != nil {
		return nil, sqlError(v, err)
	}
	enc, err := pgjson.Compile(ctx, tx, sd.Fields, v.Key)
	if err != nil {
		var te *pgjson.TypeError
		switch {
		case errors.As(err, &te):
			return nil, &ViewError{View: v.Name, Column: te.Column, Err: err}
		case errors.Is(err, pgjson.ErrNoKeyColumn), errors.Is(err, pgjson.ErrDuplicateColumn):
			return nil, &ViewError{View: v.Name, Err: err}
		}
		return nil, fmt.Errorf("distributor: view %q: %w", v.Name, err)
	}
	if v.Incremental != "" && enc.ColumnIndex(v.Incremental) < 0 {
		return nil, &ViewError{View: v.Name, Column: v.Incremental, Err: errors.New("incremental column not in the query's result")}
	}
	return enc, nil
}

// sameColumns reports whether fields are the columns enc was compiled for.
func sameColumns(enc *pgjson.Encoder, fields []pgconn.FieldDescription) bool {
	cols := enc.Columns()
	if len(cols) != len(fields) {
		return false
	}
	for i, f := range fields {
		if cols[i].Name != f.Name || cols[i].OID != f.DataTypeOID {
			return false
		}
	}
	return true
}

// rowCodec encodes the rows of one read of a view.
type rowCodec struct {
	v      *ViewConfig
	enc    *pgjson.Encoder
	inc    int // index of the incremental column, -1 if none
	incOID uint32
	arena  []byte
	keyBuf []byte
	// keyArena: keys are strings over shared chunks (keys) instead of one allocation each.
	// Only for full reads: their key → hash map replaces the view's whole state, so a chunk
	// lives as long as that state; a poll's few keys would pin a chunk each.
	keyArena bool
	keys     []byte
	// maxBytes is the record size limit and overhead what a record takes beyond its key and
	// value (headers, Kafka's framing): a row whose key and value cannot fit is refused
	// before it is encoded (0: no limit).
	maxBytes, overhead int
	// refused is the raw size of the last row refused before encoding (release).
	refused int
}

const keyChunk = 64 << 10

// internKey copies k into the key chunks and returns it as a string over them (no
// per-key allocation: a full read of a million rows allocates 1 M key strings otherwise,
// which the GC then marks at every cycle).
func (c *rowCodec) internKey(k []byte) string {
	if len(k) == 0 || len(k) > keyChunk/8 {
		return string(k)
	}
	if cap(c.keys)-len(c.keys) < len(k) {
		c.keys = make([]byte, 0, keyChunk)
	}
	start := len(c.keys)
	c.keys = append(c.keys, k...)
	return unsafe.String(&c.keys[start], len(k)) // never written again
}

// A codec's value chunks start at firstArenaChunk and double up to arenaChunk: a full
// read fills megabytes, while a cycle's re-read of a view (a codec of its own, for a few
// rows) would otherwise allocate and clear a whole megabyte for a few hundred bytes — at
// every cycle, for every view.
const (
	firstArenaChunk = 16 << 10
	arenaChunk      = 1 << 20
)

func newRowCodec(v *ViewConfig, enc *pgjson.Encoder, maxBytes, overhead int) *rowCodec {
	c := &rowCodec{v: v, enc: enc, inc: -1, maxBytes: maxBytes, overhead: overhead}
	if v.Incremental != "" {
		c.inc = enc.ColumnIndex(v.Incremental)
		c.incOID = enc.Columns()[c.inc].OID
	}
	return c
}

// encode returns the record key and the JSON value (stable: it is never overwritten) of a
// raw binary row. c.keyBuf holds the key's bytes until the next call. A row whose key and
// value are bound to exceed the record size limit (pgjson's lower bounds from the raw
// values' lengths) is refused before anything is encoded: a row of a huge text or array
// costs neither its encoding's memory nor its time. The exact size is checked by the
// caller, after encoding.
func (c *rowCodec) encode(raw [][]byte) (key string, value []byte, err error) {
	if c.maxBytes > 0 {
		kn := c.enc.MinKeyLen(c.v.Name, raw)
		if n := kn + c.enc.MinValueLen(raw) + c.overhead; n > c.maxBytes {
			hint := fmt.Sprintf("(a key of at least %d bytes)", kn)
			if kn <= 1024 {
				if k, err := c.enc.AppendKey(nil, c.v.Name, raw); err == nil {
					hint = string(k)
				}
			}
			col := largest(raw)
			c.refused = 0
			for _, v := range raw {
				c.refused += len(v)
			}
			return "", nil, &ViewError{View: c.v.Name, Column: c.enc.Columns()[col].Name, Key: hint,
				Err: fmt.Errorf("record of at least %d bytes (this column's value %d bytes) exceeds the broker's message limit of %d bytes (refused before encoding)", n, len(raw[col]), c.maxBytes)}
		}
	}
	c.keyBuf, err = c.enc.AppendKey(c.keyBuf[:0], c.v.Name, raw)
	if err != nil {
		if errors.Is(err, pgjson.ErrNullKey) {
			parts, _ := c.partialKey(raw)
			return "", nil, &ViewError{View: c.v.Name, Key: parts, Err: err}
		}
		return "", nil, &ViewError{View: c.v.Name, Err: err}
	}
	if c.keyArena {
		key = c.internKey(c.keyBuf)
	} else {
		key = string(c.keyBuf)
	}
	if cap(c.arena)-len(c.arena) < 4096 {
		c.arena = make([]byte, 0, min(max(2*cap(c.arena), firstArenaChunk), arenaChunk))
	}
	start := len(c.arena)
	c.arena, err = c.enc.AppendValue(c.arena, raw)
	if err != nil {
		return "", nil, &ViewError{View: c.v.Name, Key: key, Err: err}
	}
	return key, c.arena[start:len(c.arena):len(c.arena)], nil
}

// hugeRead is the raw size of a refused row from which its read's memory is released at
// once (release).
const hugeRead = 64 << 20

// release frees the memory a huge row refused by encode held, once its read's rows are
// closed: pgconn reads a row whole into a buffer of its size and keeps that buffer until
// the connection's next read, which for a connection back in the pool may be long after;
// a small statement on tx has it let the buffer go, and a collection frees it (the GC's
// pacing alone lets a few such buffers add up to several times a row's size first).
func (c *rowCodec) release(ctx context.Context, rn capture.Runner) {
	if c.refused < hugeRead {
		return
	}
	c.refused = 0
	rn.Release(ctx)
}

// largest returns the index of the longest of a row's raw values: the column a refusal
// of the row's size names.
func largest(raw [][]byte) int {
	col := 0
	for i, v := range raw {
		if len(v) > len(raw[col]) {
			col = i
		}
	}
	return col
}

// incMax tracks the highest incremental value of a read that may become the watermark
// (bound), and counts the NULL values. Fixed-width integer and time types (int2/4/8, date,
// timestamp, timestamptz: big-endian signed integers in binary format) are compared on
// their raw bytes; numeric through its key text.
type incMax struct {
	c     *rowCodec
	bound incBound
	raw   []byte // raw value of the maximum (fixed-width types)
	text  string // key text of the maximum (numeric)
	set   bool
	nulls int64 // rows whose incremental value is NULL
}

// add takes the row's incremental value into the maximum. beyond reports a value above the
// bound (a future time, infinity, NaN), which is left out of the maximum.
func (m *incMax) add(row [][]byte) (beyond bool, err error) {
	c := m.c
	if c.inc < 0 {
		return false, nil
	}
	v := row[c.inc]
	if v == nil {
		m.nulls++
		return false, nil
	}
	if c.incOID == pgtype.NumericOID {
		b, err := c.enc.AppendKeyText(nil, c.inc, row)
		if err != nil {
			return false, &ViewError{View: c.v.Name, Column: c.v.Incremental, Err: err}
		}
		if !m.bound.textOK(string(b)) {
			return true, nil
		}
		if !m.set || incLess(c.incOID, m.text, string(b)) {
			m.text, m.set = string(b), true
		}
		return false, nil
	}
	if !m.bound.rawOK(v) {
		return true, nil
	}
	if !m.set || beInt(m.raw) < beInt(v) {
		m.raw, m.set = append(m.raw[:0], v...), true
	}
	return false, nil
}

// value returns the key text of the maximum ("" if none).
func (m *incMax) value() (string, error) {
	if !m.set {
		return "", nil
	}
	if m.c.incOID == pgtype.NumericOID {
		return m.text, nil
	}
	row := make([][]byte, len(m.c.enc.Columns()))
	row[m.c.inc] = m.raw
	b, err := m.c.enc.AppendKeyText(nil, m.c.inc, row)
	if err != nil {
		return "", &ViewError{View: m.c.v.Name, Column: m.c.v.Incremental, Err: err}
	}
	return string(b), nil
}

// beInt decodes a big-endian signed integer of 2, 4 or 8 bytes.
func beInt(b []byte) int64 {
	switch len(b) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b)))
	case 8:
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// partialKey describes a row whose key has a NULL column, for the error message.
func (c *rowCodec) partialKey(raw [][]byte) (string, error) {
	s := ""
	for i, k := range c.v.Key {
		idx := c.enc.ColumnIndex(k)
		if i > 0 {
			s += "|"
		}
		if raw[idx] == nil {
			s += "NULL"
			continue
		}
		b, err := c.enc.AppendKeyText(nil, idx, raw)
		if err != nil {
			return s, err
		}
		s += string(b)
	}
	return s, nil
}

// estimateRows returns the planner's row estimate of the view's query (0 if unknown), to
// size the key → hash map of a first snapshot (growing it costs a rehash at every doubling).
// It runs in a savepoint: a failing EXPLAIN must not abort the snapshot transaction.
func estimateRows(ctx context.Context, tx pgx.Tx, query string) int {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0
	}
	defer func() { _ = sp.Rollback(ctx) }()
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := sp.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query).Scan(&plan); err != nil || len(plan) == 0 {
		return 0
	}
	return int(min(max(plan[0].Plan.Rows, 0), maxPresize))
}

const maxPresize = 20_000_000
