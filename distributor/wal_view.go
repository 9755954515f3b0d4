package distributor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// How a wal view turns changed base rows into its changed rows (capture.Analyze derives,
// for every occurrence of a base table in the view's query, the Mapping its changes take):
//
//   - a mapping whose values are view keys (a table whose identity is the key, or whose
//     joins lead to the key): the keys the changed rows give, old and new, are re-read by
//     key;
//   - any other mapping: the view rows whose mapped columns hold the values the changed
//     rows give now are re-read by those columns, and the rows that held them when they
//     were published — a reverse map (depMap) of the published rows, one per set of mapped
//     columns — are the rows that may have left;
//   - a mapping with hops first turns the changed rows' values into the view's through
//     its joins (NewHopLookup), in the cycle's snapshot;
//   - a table one of whose occurrences has no mapping: the whole view is re-read
//     (wal_cycle.go).
//
// A row that may have left and is found by no lookup is gone: a tombstone. Under a weak
// mapping it may still be in the view, holding other values (the null-extended row of an
// outer join), so it is re-read by key first. A row whose content hash did not change is
// not published again.

// walView is a view's capture plan in a session.
type walView struct {
	st   *viewState
	deps *capture.ViewDeps
	// byKey reads rows by the binary values of the key columns; byKeyText by key texts
	// (rows found in a reverse map).
	byKey, byKeyText *capture.Lookup
	routes           map[uint32][]*route // base table → a route per mapped occurrence
	byCols           []*capture.Lookup   // per reverse map (st.depSpecs): by its columns
	lastFull         time.Time
	lastRead         time.Duration // its last cycle's reads (readJobs reads the longest first)
	// codec encodes the rows its cycles re-read, one cycle's reads after the other's: its
	// value chunks are filled by many cycles instead of one chunk each.
	codec *rowCodec
}

// route is how one Mapping's changes become rows to re-read.
type route struct {
	m   *capture.Mapping
	pos []int           // where m.TableCols are in the table's captured columns (bindColumns)
	hop *capture.Lookup // the hops' query, or nil
	rev int             // the reverse map of m.Cols (index in st.depSpecs); -1 for a key mapping
	// perm, for a key mapping: per view key column, the index of its value in m.Cols.
	perm []int
}

// depMap is a reverse map of a view: which published keys hold which values in columns
// cols, and the other way round.
type depMap struct {
	cols  []int
	byID  map[capture.Identity]map[string]struct{}
	ofKey map[string]capture.Identity
}

func newDepMap(cols []int) *depMap {
	return &depMap{cols: cols, byID: map[capture.Identity]map[string]struct{}{}, ofKey: map[string]capture.Identity{}}
}

// identity is the values a raw row holds in the map's columns.
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
	cols []int
}

func newWalView(st *viewState, d *capture.ViewDeps) (*walView, error) {
	v := &walView{st: st, deps: d, routes: map[uint32][]*route{}}
	sql := st.cfg.SQL
	var err error
	if v.byKey, err = capture.NewLookup(d, sql, d.Key); err != nil {
		return nil, err
	}
	oldSpecs := st.depSpecs
	st.depSpecs = nil
	weak := false
	for _, t := range d.Tables {
		for _, m := range d.Maps[t.OID] {
			r := &route{m: m, rev: -1}
			if len(m.Hops) > 0 {
				if r.hop, err = capture.NewHopLookup(m); err != nil {
					return nil, err
				}
			}
			if m.IsKey {
				for _, k := range d.Key {
					r.perm = append(r.perm, slices.Index(m.Cols, k))
				}
			} else {
				r.rev = slices.IndexFunc(st.depSpecs, func(s depSpec) bool { return slices.Equal(s.cols, m.Cols) })
				if r.rev < 0 {
					r.rev = len(st.depSpecs)
					st.depSpecs = append(st.depSpecs, depSpec{cols: m.Cols})
					l, err := capture.NewLookup(d, sql, m.Cols)
					if err != nil {
						return nil, err
					}
					v.byCols = append(v.byCols, l)
				}
			}
			weak = weak || !m.Strong
			v.routes[t.OID] = append(v.routes[t.OID], r)
		}
	}
	if weak {
		if v.byKeyText, err = capture.NewKeyLookup(d, sql); err != nil {
			return nil, fmt.Errorf("%w (needed to re-read the rows that leave an outer join's match; select the joined tables' keys differently or use capture: poll)", err)
		}
	}
	// The reverse maps of an earlier session of the activation hold while the analysis
	// gives the same ones; others are rebuilt by the session's first full read.
	if !slices.EqualFunc(oldSpecs, st.depSpecs, func(a, b depSpec) bool { return slices.Equal(a.cols, b.cols) }) {
		st.deps = nil
	}
	return v, nil
}

// plan has PostgreSQL's planner say, for each lookup of v, whether reading its rows one
// value at a time is cheaper (capture.Lookup.Plan).
func (v *walView) plan(ctx context.Context, tx pgx.Tx) error {
	for _, l := range append([]*capture.Lookup{v.byKey, v.byKeyText}, v.byCols...) {
		if l == nil {
			continue
		}
		if err := l.Plan(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// bindColumns places each route's columns among its table's captured columns.
func (v *walView) bindColumns(captured map[uint32]capture.TableColumns) {
	for oid, rs := range v.routes {
		names := captured[oid].Names
		for _, r := range rs {
			r.pos = r.pos[:0]
			for _, c := range r.m.TableCols {
				r.pos = append(r.pos, slices.Index(names, c.Name))
			}
		}
	}
}

// capturedColumns lists, per base table of the views, the columns its changes must carry:
// its identity, then every column a mapping reads, by attribute number.
func capturedColumns(views []*walView) map[uint32]capture.TableColumns {
	out := map[uint32]capture.TableColumns{}
	extra := map[uint32]map[int16]string{}
	for _, v := range views {
		for _, t := range v.deps.Tables {
			if _, ok := out[t.OID]; !ok {
				tc := capture.TableColumns{Identity: len(t.Identity)}
				for _, c := range t.Identity {
					tc.Names = append(tc.Names, c.Name)
				}
				out[t.OID] = tc
				extra[t.OID] = map[int16]string{}
			}
			for _, m := range v.deps.Maps[t.OID] {
				for _, c := range m.TableCols {
					if !slices.ContainsFunc(t.Identity, func(i capture.Column) bool { return i.Name == c.Name }) {
						extra[t.OID][c.Num] = c.Name
					}
				}
			}
		}
	}
	for oid, cols := range extra {
		nums := make([]int16, 0, len(cols))
		for n := range cols {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		tc := out[oid]
		for _, n := range nums {
			tc.Names = append(tc.Names, cols[n])
		}
		out[oid] = tc
	}
	return out
}

// viewChanges are, per route, the values (old and new) of one view's mapped tables'
// changed rows in a cycle. Past the view's bulkLimit it keeps none: the view is read
// whole (wal_bulk.go).
type viewChanges struct {
	in   map[*route]map[capture.Identity]struct{}
	n    int  // values in in
	bulk bool // past the limit: in is dropped
}

func newViewChanges() *viewChanges {
	return &viewChanges{in: map[*route]map[capture.Identity]struct{}{}}
}

// add records a change of a mapped table (unmapped ones make the view read in full).
func (ch *viewChanges) add(v *walView, c capture.Change) {
	if c.Unknown || ch.bulk {
		return
	}
	for _, r := range v.routes[c.Rel] {
		set := ch.in[r]
		for _, tuple := range []capture.Identity{c.Old, c.New} {
			if tuple == "" {
				continue
			}
			vals := tuple.Values()
			var b []byte
			for _, p := range r.pos {
				b = capture.AppendIdentity(b, vals[p])
			}
			if set == nil {
				set = map[capture.Identity]struct{}{}
				ch.in[r] = set
			}
			before := len(set)
			set[capture.Identity(b)] = struct{}{}
			ch.n += len(set) - before
		}
	}
	if limit := bulkLimit(v.st); limit >= 0 && ch.n > limit {
		ch.bulk, ch.in = true, nil
	}
}

// foundRow is a row re-read in a cycle.
type foundRow struct {
	value []byte
	hash  uint64
	ids   []capture.Identity // per st.deps
}

// mappedRead is one cycle's re-read of a mapped view so far. The rows of the values that
// the cycle's transactions changed can be read while later transactions are still being
// received: the snapshot is fixed, so a row read once is read for good, and each value
// is read once. The rows that left are settled at the end, in mappedOut, once every
// change is known.
type mappedRead struct {
	v     *walView
	codec *rowCodec
	found map[string]*foundRow
	// prev holds the keys the changes may have touched: true for those a weak mapping
	// found, which are re-read by key before they count as gone.
	prev  map[string]bool
	byKey map[string]struct{}                      // the keys already read by key
	done  map[*route]map[capture.Identity]struct{} // route inputs handled
	keys  map[capture.Identity]struct{}            // key values read
	cols  []map[capture.Identity]struct{}          // per reverse map: the values read
	n     int                                      // the values looked up (keys, mapped values), after the hops
	err   error                                    // the read that failed: the view's cycle fails with it; errBulk: read whole
	took  time.Duration                            // the time its statements took (capture.Query.Took)
}

func (w *walSession) newMappedRead(v *walView) *mappedRead {
	cfg := v.st.cfg
	if v.codec == nil || v.codec.enc != v.st.enc {
		v.codec = newRowCodec(cfg, v.st.enc, w.s.cfg.maxBytes, headerBytes(cfg.Name)+recordOverhead)
	}
	a := &mappedRead{v: v, codec: v.codec,
		found: map[string]*foundRow{}, prev: map[string]bool{}, byKey: map[string]struct{}{},
		done: map[*route]map[capture.Identity]struct{}{}, keys: map[capture.Identity]struct{}{}}
	for range v.byCols {
		a.cols = append(a.cols, map[capture.Identity]struct{}{})
	}
	return a
}

// query is the lookup of tuples by l, whose rows a records. A key found twice with other
// content is two rows with one key: in one snapshot a key's row is the same at every read.
func (a *mappedRead) query(l *capture.Lookup, tuples [][][]byte) capture.Query {
	st := a.v.st
	cfg := st.cfg
	hdr := headerBytes(cfg.Name)
	maxBytes := a.codec.maxBytes
	seen := map[string]bool{}
	return capture.Query{L: l, Tuples: tuples, Took: &a.took, Each: func(raw [][]byte) error {
		key, value, err := a.codec.encode(raw)
		if err != nil {
			return err
		}
		if seen[key] {
			return a.duplicate(key)
		}
		seen[key] = true
		if n := len(key) + len(value) + hdr + recordOverhead; n > maxBytes {
			return &ViewError{View: cfg.Name, Key: key, Err: fmt.Errorf("record of %d bytes exceeds the broker's message limit of %d bytes", n, maxBytes)}
		}
		f := &foundRow{value: value, hash: record.RowHash(a.codec.keyBuf, value)}
		if old, ok := a.found[key]; ok && old.hash != f.hash {
			return a.duplicate(key)
		}
		for _, m := range st.deps {
			f.ids = append(f.ids, m.identity(raw))
		}
		a.found[key] = f
		return nil
	}}
}

// run runs queries of a's view with rn.
func (a *mappedRead) run(ctx context.Context, rn capture.Runner, qs ...capture.Query) error {
	err := rn.Run(ctx, qs...)
	a.codec.release(ctx, rn) // after the rows are closed
	if err != nil {
		return sqlError(a.v.st.cfg, err)
	}
	return nil
}

func (a *mappedRead) duplicate(key string) error {
	return &ViewError{View: a.v.st.cfg.Name, Key: key, Err: errors.New("duplicate key in one snapshot (key columns must be unique in the view)")}
}

// read reads with rn the rows of the values in ch that a did not read yet. After an
// error it reads nothing more and returns that error.
func (a *mappedRead) read(ctx context.Context, rn capture.Runner, ch *viewChanges) error {
	if a.err == nil && ch.bulk {
		a.err = errBulk
	}
	if a.err == nil {
		a.err = a.readNew(ctx, rn, ch)
	}
	if errors.Is(a.err, errBulk) {
		// What was read so far is not needed: the view is read whole.
		a.found, a.prev, a.byKey, a.done, a.keys, a.cols = nil, nil, nil, nil, nil, nil
	}
	return a.err
}

// routeInput is a route's changed values that a read has not looked up yet.
type routeInput struct {
	r      *route
	tuples [][][]byte
}

// readNew reads the rows of ch's new values: the hops of every route at once, then the
// lookups by key and by mapped columns at once (two steps of rn, one when no route hops).
func (a *mappedRead) readNew(ctx context.Context, rn capture.Runner, ch *viewChanges) error {
	v, st := a.v, a.v.st
	cfg := st.cfg
	limit := bulkLimit(st)
	if limit >= 0 && a.n+ch.n > limit {
		return errBulk
	}
	var ins []*routeInput
	var hops []capture.Query
	for _, rs := range v.routes {
		for _, r := range rs {
			in := ch.in[r]
			if len(in) == 0 {
				continue
			}
			done := a.done[r]
			if done == nil {
				done = map[capture.Identity]struct{}{}
				a.done[r] = done
			}
			ri := &routeInput{r: r}
			for id := range in {
				if _, ok := done[id]; ok {
					continue
				}
				done[id] = struct{}{}
				ri.tuples = append(ri.tuples, id.Values())
			}
			if len(ri.tuples) == 0 {
				continue
			}
			ins = append(ins, ri)
			if r.hop != nil {
				hops = append(hops, hopQuery(r.hop, ri, &a.took))
			}
		}
	}
	if len(hops) > 0 {
		if err := rn.Run(ctx, hops...); err != nil {
			return sqlError(cfg, err)
		}
	}
	var keyTuples [][][]byte
	colTuples := make([][][][]byte, len(v.byCols))
	row := make([][]byte, len(v.deps.Columns))
	for _, ri := range ins {
		r := ri.r
		if a.n += len(ri.tuples); limit >= 0 && a.n > limit {
			return errBulk
		}
		for _, vals := range ri.tuples {
			if r.rev < 0 {
				kv := make([][]byte, len(r.perm))
				var b []byte
				for i, p := range r.perm {
					kv[i] = vals[p]
					b = capture.AppendIdentity(b, vals[p])
				}
				id := capture.Identity(b)
				for i, k := range v.deps.Key {
					row[k] = kv[i]
				}
				if key, err := st.enc.AppendKey(nil, cfg.Name, row); err == nil {
					a.note(string(key), true) // read by key: found, or gone
					a.byKey[string(key)] = struct{}{}
				}
				if _, ok := a.keys[id]; ok {
					continue
				}
				a.keys[id] = struct{}{}
				keyTuples = append(keyTuples, kv)
				continue
			}
			var b []byte
			for _, val := range vals {
				b = capture.AppendIdentity(b, val)
			}
			id := capture.Identity(b)
			if r.rev < len(st.deps) {
				for k := range st.deps[r.rev].byID[id] {
					a.note(k, r.m.Strong)
				}
			}
			if _, ok := a.cols[r.rev][id]; ok {
				continue
			}
			a.cols[r.rev][id] = struct{}{}
			colTuples[r.rev] = append(colTuples[r.rev], vals)
		}
	}
	var qs []capture.Query
	if len(keyTuples) > 0 {
		qs = append(qs, a.query(v.byKey, keyTuples))
	}
	for i, tuples := range colTuples {
		if len(tuples) > 0 {
			qs = append(qs, a.query(v.byCols[i], tuples))
		}
	}
	return a.run(ctx, rn, qs...)
}

// note records a published key the changes may have touched. One that any weak mapping
// found is re-read by key before it counts as gone: a strong one's lookup not finding it
// does not say the other occurrence's change left it out of the view.
func (a *mappedRead) note(key string, strong bool) {
	a.prev[key] = a.prev[key] || !strong
}

// hopQuery runs a mapping's hops for ri's values and replaces them with the distinct
// values they give the view's columns.
func hopQuery(hop *capture.Lookup, ri *routeInput, took *time.Duration) capture.Query {
	q := capture.Query{L: hop, Tuples: ri.tuples, Took: took}
	ri.tuples = nil
	q.Each = func(row [][]byte) error {
		vals := make([][]byte, len(row))
		for i, v := range row {
			if v != nil {
				vals[i] = slices.Clone(v)
			}
		}
		ri.tuples = append(ri.tuples, vals)
		return nil
	}
	return q
}

// finish re-reads with rn the rows of the view that ch touched and a did not read yet,
// then the rows that held a changed identity. It reads the view's published state and
// changes none, so the views of a cycle finish at once (readJobs).
func (a *mappedRead) finish(ctx context.Context, rn capture.Runner, ch *viewChanges) error {
	st := a.v.st
	if err := a.read(ctx, rn, ch); err != nil {
		return err
	}
	found, prev, byKey := a.found, a.prev, a.byKey
	// Rows a weak mapping says held a changed value but that hold none now: re-read by key
	// (they may still be in the view, an outer join's null-extended row, or gone).
	var missing [][][]byte
	for k, weak := range prev {
		if !weak {
			continue
		}
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
		if err := a.run(ctx, rn, a.query(a.v.byKeyText, missing)); err != nil {
			return err
		}
	}
	return nil
}

// mappedOut adds to t the rows of a's view whose content changed and the tombstones of
// the rows that are gone, once a finished.
func (w *walSession) mappedOut(a *mappedRead, src source, t *txnOut) {
	s := w.s
	st := a.v.st
	cfg := st.cfg
	found, prev := a.found, a.prev
	s.m.viewRead.WithLabelValues(s.cfg.Topic, cfg.Name).Add(a.took.Seconds())

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
		return
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
}
