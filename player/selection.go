package player

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/wire"
)

// Bounds of a filter: its text, and the cost of one evaluation (CEL's runtime cost: about
// one unit per operation, with strings and lists counted by size). A row whose evaluation
// goes over the cost does not pass.
const (
	maxFilterBytes = 4096
	maxFilterCost  = 10_000
)

// selection is what a target receives of one view: the rows that pass its filter (the
// target's own, ANDed with the mandatory filter of its grant) and its hash shard. It is
// compiled once, at the Hello, and immutable after.
type selection struct {
	view   string
	filter string      // the effective filter's text ("": every row)
	prog   cel.Program // nil: no filter, or an exact one
	shard  uint32
	shards uint32 // 0: no sharding
	// columns: the members each row's value keeps (nil: every column); colKey names the
	// set, for the dispatcher's one projection per set.
	columns map[string]bool
	colKey  string
	eq      *eqPart // the filter's indexed conjunct (filterindex.go); nil: none
	// exact: the filter is its equality part alone (`col == lit`, `col in [lits]`), which
	// passes decides from the column's index key, with no compiled program: a program is
	// most of a selection's memory, and one column equal to a value is the commonest
	// filter (a tenant, a user, a market).
	exact bool
}

// String is the selection as the status page shows it: the effective filter and the shard.
func (sel *selection) String() string {
	out := sel.filter
	if sel.shards > 0 {
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("shard %d/%d", sel.shard, sel.shards)
	}
	if sel.columns != nil {
		if out != "" {
			out += " "
		}
		out += "columns " + strings.ReplaceAll(sel.colKey, "\x00", ",")
	}
	return out
}

// selectionsOf compiles a Hello's selections (with the grants' mandatory filters, by
// view: mandatory) into the target's map (nil: nothing selected, every view whole).
// columns returns the columns of a view as its rows show them (nil when the view holds no
// row yet: the filter is then parsed but not checked against columns). Errors are
// ErrBadHello naming the view and, from CEL's checker, the column.
func selectionsOf(h *statecastv1.Hello, mandatory map[string]string, columns func(view string) []string) (map[string]*selection, error) {
	if len(h.GetSelections()) == 0 && len(mandatory) == 0 {
		return nil, nil
	}
	views := h.GetViews()
	out := map[string]*selection{}
	for _, s := range h.GetSelections() {
		v := s.GetView()
		switch {
		case !record.ValidViewName(v):
			return nil, fmt.Errorf("%w: selection of bad view name %q", ErrBadHello, v)
		case len(views) > 0 && !slices.Contains(views, v):
			return nil, fmt.Errorf("%w: selection of view %q, which is not one of the Hello's views", ErrBadHello, v)
		case out[v] != nil:
			return nil, fmt.Errorf("%w: two selections of view %q", ErrBadHello, v)
		case s.GetShardCount() > 0 && s.GetShardIndex() >= s.GetShardCount():
			return nil, fmt.Errorf("%w: view %q: shard_index %d is not below shard_count %d", ErrBadHello, v, s.GetShardIndex(), s.GetShardCount())
		case s.GetShardCount() == 0 && s.GetShardIndex() != 0:
			return nil, fmt.Errorf("%w: view %q: shard_index %d without a shard_count", ErrBadHello, v, s.GetShardIndex())
		case len(s.GetFilter()) > maxFilterBytes:
			return nil, fmt.Errorf("%w: view %q: a filter of %d bytes, at most %d", ErrBadHello, v, len(s.GetFilter()), maxFilterBytes)
		}
		sel := &selection{view: v, filter: strings.TrimSpace(s.GetFilter()), shard: s.GetShardIndex(), shards: s.GetShardCount()}
		if cs := s.GetColumns(); len(cs) > 0 {
			known := columns(v)
			sel.columns = map[string]bool{}
			for _, c := range cs {
				switch {
				case sel.columns[c]:
					return nil, fmt.Errorf("%w: view %q: column %q listed twice", ErrBadHello, v, c)
				case known != nil && !slices.Contains(known, c):
					return nil, fmt.Errorf("%w: view %q has no column %q (its columns: %s)", ErrBadHello, v, c, strings.Join(known, ", "))
				}
				sel.columns[c] = true
			}
			sorted := slices.Sorted(maps.Keys(sel.columns))
			sel.colKey = strings.Join(sorted, "\x00")
		}
		out[v] = sel
	}
	for v, f := range mandatory {
		sel := out[v]
		if sel == nil {
			sel = &selection{view: v}
			out[v] = sel
		}
		if sel.filter == "" {
			sel.filter = f
		} else {
			sel.filter = "(" + f + ") && (" + sel.filter + ")"
		}
	}
	for v, sel := range out {
		if sel.filter == "" {
			continue
		}
		env, ast, err := checkFilter(sel.filter, columns(v))
		if err == nil {
			if p := exactPart(ast); p != nil {
				sel.eq, sel.exact = p, true
				continue
			}
			sel.prog, err = env.Program(ast, cel.CostLimit(maxFilterCost))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: view %q: filter %q: %v", ErrBadHello, v, sel.filter, err)
		}
		sel.eq = eqPartOf(ast)
	}
	return out, nil
}

// compileFilter compiles a filter over the columns (each a dyn variable: the record format
// carries JSON, whose values are typed per row); nil columns: the names are not checked.
func compileFilter(text string, columns []string) (cel.Program, *cel.Ast, error) {
	env, ast, err := checkFilter(text, columns)
	if err != nil {
		return nil, nil, err
	}
	prog, err := env.Program(ast, cel.CostLimit(maxFilterCost))
	return prog, ast, err
}

// checkFilter parses a filter and checks it against the columns (nil: parsed only).
func checkFilter(text string, columns []string) (*cel.Env, *cel.Ast, error) {
	env, err := filterEnv(columns)
	if err != nil {
		return nil, nil, err
	}
	var ast *cel.Ast
	var iss *cel.Issues
	if columns != nil {
		ast, iss = env.Compile(text)
	} else {
		ast, iss = env.Parse(text)
	}
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("%s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if columns != nil && ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, nil, fmt.Errorf("yields %s, not a bool", ast.OutputType())
	}
	return env, ast, nil
}

// envs caches the CEL environments by column list: targets of one view share theirs (an
// environment is most of a compiled filter's memory). Bounded: past maxEnvs it starts over.
var envs = struct {
	sync.Mutex
	m map[string]*cel.Env
}{m: map[string]*cel.Env{}}

const maxEnvs = 1024

// filterEnv returns the environment of a view with columns (nil: none declared, for a
// filter that is only parsed).
func filterEnv(columns []string) (*cel.Env, error) {
	key := strings.Join(columns, "\x00")
	if columns == nil {
		key = "\x00nil"
	}
	envs.Lock()
	defer envs.Unlock()
	if env := envs.m[key]; env != nil {
		return env, nil
	}
	opts := []cel.EnvOption{cel.ParserExpressionSizeLimit(maxFilterBytes)}
	for _, c := range columns {
		opts = append(opts, cel.Variable(c, cel.DynType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	if len(envs.m) >= maxEnvs {
		clear(envs.m)
	}
	envs.m[key] = env
	return env, nil
}

// passes reports whether the row r passes the selection (r holds a live row, not a
// tombstone). A filter whose evaluation fails (a column missing from this row, operands of
// types that do not compare, the cost bound) does not pass.
func (sel *selection) passes(r *rowVals) bool {
	if sel.shards > 0 && record.ShardString(r.it.key, sel.shards) != sel.shard {
		return false
	}
	if sel.exact {
		vars, ok := r.values()
		if !ok {
			return false
		}
		v, ok := vars[sel.eq.col]
		if !ok {
			return false // CEL: no such attribute, an error
		}
		k, ok := indexKey(v)
		return ok && slices.Contains(sel.eq.vals, k)
	}
	if sel.prog == nil {
		return true
	}
	act, ok := r.decode()
	if !ok {
		return false
	}
	out, _, err := sel.prog.Eval(act)
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// rowVals is one row record's value decoded once for every selection that looks at it
// (the dispatcher shares it between targets), and its tombstone, made once when a target
// sees the row move out.
type rowVals struct {
	it      *item
	vars    map[string]any // the row's columns
	act     cel.Activation // the same, for CEL
	decoded bool
	ok      bool
	tomb    *item
	proj    map[string]*item // by selection.colKey: the row cut to those columns
}

// projected returns the row cut to sel's columns (the row itself when sel lists none),
// made once per column set.
func (r *rowVals) projected(sel *selection) *item {
	if sel.columns == nil || r.it.tombstone {
		return r.it
	}
	if p := r.proj[sel.colKey]; p != nil {
		return p
	}
	p := r.it.project(sel.columns)
	if r.proj == nil {
		r.proj = map[string]*item{}
	}
	r.proj[sel.colKey] = p
	return p
}

// project returns the entry with its value cut to the members named in keep, in their
// order in the value (the record format's order), their bytes as they are.
func (it *item) project(keep map[string]bool) *item {
	var e statecastv1.Entry
	if err := proto.Unmarshal(it.wire, &e); err != nil {
		panic(fmt.Sprintf("player: unmarshal an entry of ours: %v", err)) // unreachable: entryItem made it
	}
	e.Value = projectValue(e.Value, keep)
	p := entryItem(&e)
	p.dispatched = it.dispatched
	return p
}

// projectValue cuts a row's JSON object to the members named in keep; a value that is not
// an object is returned as it is.
func projectValue(value []byte, keep map[string]bool) []byte {
	d := json.NewDecoder(bytes.NewReader(value))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return value
	}
	out := []byte{'{'}
	for d.More() {
		start := d.InputOffset()
		t, err := d.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			return value
		}
		nameEnd := d.InputOffset()
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return value
		}
		if !keep[name] {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		// The member's name as written (after the separator before it), then its value.
		nb := bytes.TrimLeft(value[start:nameEnd], ", \t\r\n")
		out = append(out, nb...)
		out = append(out, ':')
		out = append(out, raw...)
	}
	return append(out, '}')
}

func (r *rowVals) decode() (cel.Activation, bool) {
	if !r.decoded {
		r.decoded = true
		if vars, ok := decodeRow(r.it.value()); ok {
			r.vars = vars
			r.act, _ = cel.NewActivation(vars)
			r.ok = r.act != nil
		}
	}
	return r.act, r.ok
}

// values returns the row's columns (false: not a decodable row).
func (r *rowVals) values() (map[string]any, bool) {
	_, ok := r.decode()
	return r.vars, ok
}

// tombstone returns the tombstone of the row's key at the row's index.
func (r *rowVals) tombstone() *item {
	if r.tomb == nil {
		r.tomb = r.it.asTombstone()
	}
	return r.tomb
}

// decodeRow decodes a row's JSON value into CEL's variables: integers as int64 (the
// format writes them as exact digits), other numbers as float64, the rest as
// encoding/json decodes them.
func decodeRow(value []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	for k, v := range m {
		m[k] = celValue(v)
	}
	return m, true
}

func celValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = celValue(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = celValue(x[k])
		}
	}
	return v
}

// selections compiles a Hello's selections against the columns of the stream's views
// (selectionsOf), outside the stream's lock.
func (s *stream) selections(h *statecastv1.Hello, mandatory map[string]string) (map[string]*selection, error) {
	if len(h.GetSelections()) == 0 && len(mandatory) == 0 {
		return nil, nil
	}
	cols := map[string][]string{}
	s.mu.Lock()
	for _, sel := range h.GetSelections() {
		cols[sel.GetView()] = s.columnsOf(sel.GetView())
	}
	for v := range mandatory {
		cols[v] = s.columnsOf(v)
	}
	s.mu.Unlock()
	return selectionsOf(h, mandatory, func(v string) []string { return cols[v] })
}

// columnsOf returns the column names of a view as one of its rows in the materialized copy
// shows them (every row of a view has the same members), nil when it holds none. s.mu held.
func (s *stream) columnsOf(view string) []string {
	rs := s.rows[view]
	if rs == nil {
		return nil
	}
	it := rs.first()
	if it == nil {
		return nil
	}
	vars, ok := decodeRow(it.value())
	if !ok {
		return nil
	}
	cols := make([]string, 0, len(vars))
	for c := range vars {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return cols
}

// value returns the Entry.value bytes of an entry item (nil for a frame or a tombstone),
// read from its marshalled Entry without a copy.
func (it *item) value() []byte {
	if it.frame != nil {
		return nil
	}
	b := it.wire
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == wire.EntryValue && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			return v
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		b = b[m:]
	}
	return nil
}

// asTombstone returns a tombstone entry of it's key at it's index, with its headers (view,
// kind, epoch, source time and position, txn): what a target receives when the change at
// that index moves the row out of its selection.
func (it *item) asTombstone() *item {
	var e statecastv1.Entry
	if err := proto.Unmarshal(it.wire, &e); err != nil {
		panic(fmt.Sprintf("player: unmarshal an entry of ours: %v", err)) // unreachable: entryItem made it
	}
	e.Value, e.Tombstone = nil, true
	t := entryItem(&e)
	t.dispatched = it.dispatched
	return t
}

// choose is a target's filter of a row entry of a selected view, in every path (the
// dispatcher, recoveries, snapshots): the entry itself when its row passes the selection;
// when it does not (or it is a tombstone) and the target may hold the key before it
// (held), the tombstone of its key at its index, so a row that moves out is deleted in
// the same source transaction; else nil, nothing to receive.
func (sel *selection) choose(cur *rowVals, held func() bool) *item {
	if !cur.it.tombstone && sel.passes(cur) {
		return cur.projected(sel)
	}
	if !held() {
		return nil
	}
	if cur.it.tombstone {
		return cur.it
	}
	return cur.tombstone()
}

// maxRecoverySeen bounds the keys a recovery remembers (target.recSeen): past it, a key
// it has not seen is assumed held, which costs a tombstone that may be needless, never a
// row kept that should go.
const maxRecoverySeen = 1 << 16

// chooseCatchup is choose for a recovery's entry (history or Kafka): the target's
// holding of a key before the entry is known only for keys this recovery has delivered
// (t.recSeen); for any other it may hold the key (it held what it applied before the
// recovery, unknown to the player). t.mu held.
func (t *target) chooseCatchup(sel *selection, it *item) *item {
	cur := &rowVals{it: it}
	x := sel.choose(cur, func() bool {
		held, seen := t.recSeen[it.key]
		return held || !seen
	})
	if t.recSeen == nil {
		t.recSeen = map[string]bool{}
	}
	if _, ok := t.recSeen[it.key]; ok || len(t.recSeen) < maxRecoverySeen {
		t.recSeen[it.key] = x != nil && !x.tombstone
	}
	return x
}

// selectionOf returns the target's selection of view, nil when it receives the view whole.
func (t *target) selectionOf(view string) *selection {
	for _, sel := range t.sels {
		if sel.view == view {
			return sel
		}
	}
	return nil
}

// shardKeep is, for a view of which t selects a hash shard, the test of a row's key hash
// that keeps the shard's rows: a snapshot then copies (and pins, and walks) a shard's
// rows, not the view's, and the rows are not read to tell (stream.snapshotRows). Nil for
// other views; the rows kept still pass the whole selection when pushed.
func (t *target) shardKeep(view string) func(hash uint64) bool {
	sel := t.selectionOf(view)
	if sel == nil || sel.shards == 0 {
		return nil
	}
	n, i := sel.shards, sel.shard
	return func(h uint64) bool { return record.ShardOfHash(h, n) == i }
}
