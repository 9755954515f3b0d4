package distributor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// How a wal view turns changed base rows into its changed rows (see capture.Analyze for
// how each table is mapped):
//
//   - a table whose identity is the view's key: the changed identities, old and new, are
//     the keys to re-read (by key, through the table's index);
//   - a joined table whose identity the view selects (or that depends declares): the view
//     rows holding a changed identity now are re-read by those columns, and the rows that
//     held it when they were published — a reverse map (depMap), kept from the published
//     rows — are re-read by key: a row that no longer matches is found there;
//   - any other table: the whole view is re-read (wal_cycle.go).
//
// A key re-read that finds nothing publishes a tombstone; a row whose content hash did not
// change is not published again.

// walView is a view's capture plan in a session.
type walView struct {
	st   *viewState
	deps *capture.ViewDeps
	// byKey reads rows by the binary values of the key columns (the identities of the
	// tables the key maps); byKeyText by key texts (rows found in a reverse map).
	byKey, byKeyText *capture.Lookup
	byTable          map[uint32]*capture.Lookup // joined tables: by their identity's columns
	lastFull         time.Time
}

// depMap is the reverse map of one joined table of a view: which published keys hold which
// identity of the table, and the other way round.
type depMap struct {
	table uint32
	cols  []int // the view's output columns that hold the identity
	byID  map[capture.Identity]map[string]struct{}
	ofKey map[string]capture.Identity
}

func newDepMap(table uint32, cols []int) *depMap {
	return &depMap{table: table, cols: cols, byID: map[capture.Identity]map[string]struct{}{}, ofKey: map[string]capture.Identity{}}
}

// identity is the identity a raw row holds in the map's columns.
func (m *depMap) identity(raw [][]byte) capture.Identity {
	var b []byte
	for _, c := range m.cols {
		b = capture.AppendIdentity(b, raw[c])
	}
	return capture.Identity(b)
}

func (m *depMap) set(key string, id capture.Identity) {
	if old, ok := m.ofKey[key]; ok {
		if old == id {
			return
		}
		m.remove(key)
	}
	m.ofKey[key] = id
	keys := m.byID[id]
	if keys == nil {
		keys = map[string]struct{}{}
		m.byID[id] = keys
	}
	keys[key] = struct{}{}
}

func (m *depMap) remove(key string) {
	id, ok := m.ofKey[key]
	if !ok {
		return
	}
	delete(m.ofKey, key)
	if keys := m.byID[id]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(m.byID, id)
		}
	}
}

// depSpec is what a full read needs to rebuild a view's reverse maps.
type depSpec struct {
	table uint32
	cols  []int
}

func newWalView(st *viewState, d *capture.ViewDeps) (*walView, error) {
	v := &walView{st: st, deps: d, byTable: map[uint32]*capture.Lookup{}}
	sql := st.cfg.SQL
	var err error
	if v.byKey, err = capture.NewLookup(d, sql, d.Key); err != nil {
		return nil, err
	}
	st.depSpecs = nil
	for _, t := range d.Tables {
		m := d.Maps[t.OID]
		if m == nil || m.IsKey {
			continue
		}
		if v.byTable[t.OID], err = capture.NewLookup(d, sql, m.Cols); err != nil {
			return nil, err
		}
		st.depSpecs = append(st.depSpecs, depSpec{table: t.OID, cols: m.Cols})
	}
	if len(st.depSpecs) > 0 {
		if v.byKeyText, err = capture.NewKeyLookup(d, sql); err != nil {
			return nil, fmt.Errorf("%w (needed to re-read the rows of its joined tables' changes; select the joined tables' keys differently or use capture: poll)", err)
		}
	}
	// The reverse maps are rebuilt by the session's first full read.
	st.deps = nil
	return v, nil
}

// viewChanges are the changed identities of one view's mapped tables in a cycle.
type viewChanges struct {
	keys map[capture.Identity]struct{}            // key columns' values, in key order
	ids  map[uint32]map[capture.Identity]struct{} // joined table → identities
}

func newViewChanges() *viewChanges {
	return &viewChanges{keys: map[capture.Identity]struct{}{}, ids: map[uint32]map[capture.Identity]struct{}{}}
}

// add records a change of a mapped table (unmapped ones make the view read in full).
func (ch *viewChanges) add(v *walView, c capture.Change) {
	m := v.deps.Maps[c.Rel]
	if m == nil || c.Unknown {
		return
	}
	for _, id := range []capture.Identity{c.Old, c.New} {
		if id == "" {
			continue
		}
		if m.IsKey {
			ch.keys[keyOrder(v.deps, m, id)] = struct{}{}
			continue
		}
		set := ch.ids[c.Rel]
		if set == nil {
			set = map[capture.Identity]struct{}{}
			ch.ids[c.Rel] = set
		}
		set[id] = struct{}{}
	}
}

// keyOrder reorders an identity of a key-mapped table (its columns in the table's identity
// order) into the view's key order.
func keyOrder(d *capture.ViewDeps, m *capture.Mapping, id capture.Identity) capture.Identity {
	vals := id.Values()
	var b []byte
	for _, k := range d.Key {
		for i, c := range m.Cols {
			if c == k {
				b = capture.AppendIdentity(b, vals[i])
			}
		}
	}
	return capture.Identity(b)
}

// foundRow is a row re-read in a cycle.
type foundRow struct {
	value []byte
	hash  uint64
	ids   []capture.Identity // per st.deps
}

// mappedRead is one cycle's re-read of a mapped view so far. The rows of the identities
// that the cycle's transactions changed can be read while later transactions are still
// being received: the snapshot is fixed, so a row read once is read for good, and each
// identity is read once. The rows that lost a changed identity are read at the end, in
// mappedOut, once every change is known.
type mappedRead struct {
	v     *walView
	codec *rowCodec
	found map[string]*foundRow
	prev  map[string]struct{}                      // keys published before that the changes may have touched
	byKey map[string]struct{}                      // the keys already read by key
	keys  map[capture.Identity]struct{}            // key identities read
	ids   map[uint32]map[capture.Identity]struct{} // joined table → identities read
	err   error                                    // the read that failed: the view's cycle fails with it
}

func (w *walSession) newMappedRead(v *walView) *mappedRead {
	cfg := v.st.cfg
	return &mappedRead{v: v, codec: newRowCodec(cfg, v.st.enc, w.s.cfg.maxBytes, headerBytes(cfg.Name)+recordOverhead),
		found: map[string]*foundRow{}, prev: map[string]struct{}{}, byKey: map[string]struct{}{},
		keys: map[capture.Identity]struct{}{}, ids: map[uint32]map[capture.Identity]struct{}{}}
}

// run reads the rows l finds for tuples in tx. A key found twice with other content is
// two rows with one key: in one snapshot a key's row is the same at every read.
func (a *mappedRead) run(ctx context.Context, tx pgx.Tx, l *capture.Lookup, tuples [][][]byte) error {
	st := a.v.st
	cfg := st.cfg
	hdr := headerBytes(cfg.Name)
	maxBytes := a.codec.maxBytes
	seen := map[string]bool{}
	return l.Run(ctx, tx, tuples, func(raw [][]byte) error {
		key, value, err := a.codec.encode(raw)
		if err != nil {
			return err
		}
		dup := func() error {
			return &ViewError{View: cfg.Name, Key: key, Err: errors.New("duplicate key in one snapshot (key columns must be unique in the view)")}
		}
		if seen[key] {
			return dup()
		}
		seen[key] = true
		if n := len(key) + len(value) + hdr + recordOverhead; n > maxBytes {
			return &ViewError{View: cfg.Name, Key: key, Err: fmt.Errorf("record of %d bytes exceeds the broker's message limit of %d bytes", n, maxBytes)}
		}
		f := &foundRow{value: value, hash: record.RowHash(a.codec.keyBuf, value)}
		if old, ok := a.found[key]; ok && old.hash != f.hash {
			return dup()
		}
		for _, m := range st.deps {
			f.ids = append(f.ids, m.identity(raw))
		}
		a.found[key] = f
		return nil
	})
}

// read reads in tx the rows of the identities in ch that a did not read yet. After an
// error it reads nothing more and returns that error.
func (a *mappedRead) read(ctx context.Context, tx pgx.Tx, ch *viewChanges) error {
	if a.err == nil {
		a.err = a.readNew(ctx, tx, ch)
	}
	return a.err
}

func (a *mappedRead) readNew(ctx context.Context, tx pgx.Tx, ch *viewChanges) error {
	v, st := a.v, a.v.st
	cfg := st.cfg
	var tuples [][][]byte
	row := make([][]byte, len(v.deps.Columns))
	for id := range ch.keys {
		if _, done := a.keys[id]; done {
			continue
		}
		a.keys[id] = struct{}{}
		vals := id.Values()
		tuples = append(tuples, vals)
		for i, k := range v.deps.Key {
			row[k] = vals[i]
		}
		if key, err := st.enc.AppendKey(nil, cfg.Name, row); err == nil {
			a.prev[string(key)] = struct{}{}
			a.byKey[string(key)] = struct{}{}
		}
	}
	if len(tuples) > 0 {
		if err := a.run(ctx, tx, v.byKey, tuples); err != nil {
			return sqlError(cfg, err)
		}
	}
	for _, m := range st.deps {
		ids := ch.ids[m.table]
		done := a.ids[m.table]
		if done == nil {
			done = map[capture.Identity]struct{}{}
			a.ids[m.table] = done
		}
		tuples = tuples[:0]
		for id := range ids {
			if _, ok := done[id]; ok {
				continue
			}
			done[id] = struct{}{}
			tuples = append(tuples, id.Values())
			for k := range m.byID[id] {
				a.prev[k] = struct{}{}
			}
		}
		if len(tuples) == 0 {
			continue
		}
		if err := a.run(ctx, tx, v.byTable[m.table], tuples); err != nil {
			return sqlError(cfg, err)
		}
	}
	return nil
}

// mappedOut re-reads in tx the rows of v that ch touched and a did not read yet, then the
// rows that held a changed identity, and adds to t the rows whose content changed and the
// tombstones of the rows that are gone.
func (w *walSession) mappedOut(ctx context.Context, tx pgx.Tx, a *mappedRead, ch *viewChanges, src source, t *txnOut) error {
	s := w.s
	st := a.v.st
	cfg := st.cfg
	if err := a.read(ctx, tx, ch); err != nil {
		return err
	}
	found, prev, byKey := a.found, a.prev, a.byKey
	// Rows that held a changed identity but hold none now: re-read by key (they may still
	// be in the view, joined to another row, or gone).
	var missing [][][]byte
	for k := range prev {
		if _, ok := found[k]; ok {
			continue
		}
		if _, read := byKey[k]; read {
			continue
		}
		if _, published := st.hashes[k]; !published {
			continue
		}
		_, parts, err := record.DecodeKey([]byte(k))
		if err != nil {
			continue
		}
		tuple := make([][]byte, len(parts))
		for i, p := range parts {
			tuple[i] = []byte(p)
		}
		missing = append(missing, tuple)
	}
	if len(missing) > 0 {
		if err := a.run(ctx, tx, a.v.byKeyText, missing); err != nil {
			return sqlError(cfg, err)
		}
	}

	var rows []pendingRow
	var tombs int64
	for k, f := range found {
		if old, ok := st.hashes[k]; !ok || old != f.hash {
			rows = append(rows, pendingRow{key: k, value: f.value, hash: f.hash})
		}
	}
	var gone []string
	for k := range prev {
		if _, ok := found[k]; !ok {
			if _, published := st.hashes[k]; published {
				rows = append(rows, pendingRow{key: k})
				gone = append(gone, k)
				tombs++
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	meta := record.Meta{View: cfg.Name, Epoch: st.epoch, SourceTime: src.time, SourceLSN: src.lsn}
	t.body = append(t.body, rowsPart(rows, meta))
	t.done = append(t.done, func() {
		for k, f := range found {
			st.hashes[k] = f.hash
			for i, m := range st.deps {
				m.set(k, f.ids[i])
			}
		}
		for _, k := range gone {
			delete(st.hashes, k)
			for _, m := range st.deps {
				m.remove(k)
			}
		}
		s.m.rows.WithLabelValues(s.cfg.Topic, cfg.Name).Add(float64(int64(len(rows)) - tombs))
		s.m.tombstones.WithLabelValues(s.cfg.Topic, cfg.Name).Add(float64(tombs))
	})
	return nil
}
