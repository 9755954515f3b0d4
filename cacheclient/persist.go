package cacheclient

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/statecast/statecast/schemas/record"
)

// State file layout (all integers uvarint unless said otherwise):
//
//	"SCSTATE5"                                  8-byte magic and format version
//	len stream, stream                          the stream it belongs to
//	len topic, topic                            the Kafka topic ID the index is an offset of (0 bytes: unknown)
//	index (zigzag varint)                       the applied index of every view
//	flags, lsn, nstale, then per stale view:    the applied source state: flags bit 0 a position
//	  len name, name                            record was applied, bit 1 it had a source
//	                                            position (lsn); its stale views of the client
//	nbehind, then per view behind the stream:   its views that follow the stream at a position
//	  len name, name, lsn                       of their own (Position.Behind)
//	nviews, then per view: len name, name,      the rows of each view, and the selection
//	  len sel, sel, nrows, then per row:        they are of (Selection.String; "" the whole
//	  len key, key, len raw, raw                view)
//	xxhash64 of everything above, 8 bytes big endian
//	  or, with Config.StateKey ("SCSTATK5"):
//	HMAC-SHA256 of everything above under the key, 32 bytes
//
// Formats 4 ("SCSTATE4", without the selections: every view whole), 3 ("SCSTATE3", also
// without the views behind), 2 ("SCSTATE2", also without the topic
// ID) and 1 ("SCSTATE1", also without the source state) are still read: the client then
// resumes without a topic ID (the player cannot check that the index is an offset of its
// topic), and with format 1 the source position is unknown until the next position
// record. The next file written is of format 5. A file whose view was saved with another
// selection than the view has now is not resumed from (the rows are another subset).
//
// The checksum finds a corrupt or truncated file; it does not stop anyone who can write
// the directory from writing a file of forged rows that loads. With Config.StateKey the
// file is "SCSTATK5" (format 5's content) and ends with an HMAC instead: a client with a
// key loads only a file whose MAC verifies under it, and refuses every other file, those
// of checksum format included (one could be forged without the key); a client without a
// key refuses a keyed file, which it cannot verify. A refused file is replaced by the next
// one written, after a snapshot bootstrap.
//
// The file is written to a temp file, fsynced, renamed over the old one and the directory
// fsynced, so a crash leaves either the old or the new file. A file that fails any check is
// reported and ignored as a whole (the client then bootstraps from a snapshot).
const (
	stateMagic   = "SCSTATE5"
	stateMagicV4 = "SCSTATE4"
	stateMagicV3 = "SCSTATE3"
	stateMagicV2 = "SCSTATE2"
	stateMagicV1 = "SCSTATE1"
	// stateMagicMAC is format 5 authenticated by Config.StateKey.
	stateMagicMAC = "SCSTATK5"
)

// MinStateKeyLen is the shortest Config.StateKey: HMAC-SHA256's own output size, below
// which the key, not the MAC, is what an attacker would guess.
const MinStateKeyLen = 32

// stateHead is what a state file says besides the rows: the applied position, the topic
// ID it is an offset of, and the source state of every view.
type stateHead struct {
	index   int64
	topic   string
	src     sourceState
	version int // the file's format
	body    int // the bytes before the checksum or MAC (rows alias them)
}

// StateFileName is the name of the state file inside Config.StateDir.
const StateFileName = "cacheclient.state"

type viewCapture struct {
	name string
	sel  string // Selection.String of the view
	rows func(fn func(key, raw string) bool)
}

// capture is the view's version in cut, for the state file.
func (v *View[T]) capture(cut *Cut) viewCapture {
	s := v.In(cut).s
	bad := make(map[string]string, len(s.bad))
	for k, it := range s.bad {
		bad[k] = it.rawString()
	}
	return viewCapture{name: v.name, sel: v.Selection().String(), rows: func(fn func(key, raw string) bool) {
		if !s.root.each(func(k string, it *item[T]) bool { return fn(k, it.rawString()) }) {
			return
		}
		for k, raw := range bad {
			if !fn(k, raw) {
				return
			}
		}
	}}
}

func (c *Client) statePath() string { return filepath.Join(c.cfg.StateDir, StateFileName) }

// persist writes a state file from a consistent cut of every view.
func (c *Client) persist() (err error) {
	start := time.Now()
	var n int64
	defer func() {
		switch {
		case err != nil:
			c.st.persistErrs.Add(1)
			c.log.Error("state file not written", "err", err)
		case n == 0:
			return // nothing to persist yet (no complete state)
		default:
			c.st.persists.Add(1)
		}
		if h := c.opts.hooks.OnPersist; h != nil {
			h(n, time.Since(start), err)
		}
	}()
	// The newest publication whose changes every handler completed (handled.go): its
	// versions are immutable, a consistent cut of every view, read without the apply lock.
	cut := c.handledCut()
	if cut == nil || c.applied.Load() < 0 {
		return nil // nothing complete yet, or a repair (a failed epoch check) distrusts it
	}
	index, topic, src := cut.position, cut.topic, cut.src
	if index < 0 {
		return nil
	}
	caps := make([]viewCapture, 0, len(c.views))
	for _, v := range c.views {
		caps = append(caps, v.capture(cut))
	}
	if err := os.MkdirAll(c.cfg.StateDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.cfg.StateDir, StateFileName+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err = writeState(tmp, c.cfg.Stream, c.cfg.StateKey, stateHead{index: index, topic: topic, src: src}, caps)
	if err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), c.statePath()); err != nil {
		return err
	}
	// Without the directory's fsync the rename may not survive a crash: the next start
	// would resume from an older file. Reported like any failed write.
	if err = syncDir(c.cfg.StateDir); err != nil {
		return fmt.Errorf("cacheclient: state file written, its directory not synced: %w", err)
	}
	c.log.Debug("state file written", "index", index, "bytes", n, "took", time.Since(start))
	return nil
}

// syncDir fsyncs the directory dir (a variable: tests make it fail).
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeStaleTemps removes the temp files that writes of the state file left in dir when
// the process died before their rename: nothing else removes them, and a crash loop
// would fill the disk with one each. Only this client writes them (see Config.StateDir),
// and it calls this before its persistence goroutine starts.
func (c *Client) removeStaleTemps() {
	matches, err := filepath.Glob(filepath.Join(c.cfg.StateDir, StateFileName+".tmp*"))
	if err != nil {
		return
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			c.log.Warn("stale state temp file not removed", "path", m, "err", err)
			continue
		}
		c.log.Info("stale state temp file removed (left by a write that did not finish)", "path", m)
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeState writes a state file: checksummed, or with key (not nil) authenticated.
func writeState(f io.Writer, stream string, key []byte, head stateHead, caps []viewCapture) (int64, error) {
	cw := &countWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	magic, d := stateMagic, hash.Hash(xxhash.New())
	if key != nil {
		magic, d = stateMagicMAC, hmac.New(sha256.New, key)
	}
	w := io.MultiWriter(bw, d)
	var buf [binary.MaxVarintLen64]byte
	var werr error
	put := func(b []byte) {
		if werr == nil {
			_, werr = w.Write(b)
		}
	}
	uv := func(x uint64) { put(buf[:binary.PutUvarint(buf[:], x)]) }
	str := func(s string) { uv(uint64(len(s))); put([]byte(s)) }
	put([]byte(magic))
	str(stream)
	str(head.topic)
	put(buf[:binary.PutVarint(buf[:], head.index)])
	var flags uint64
	if head.src.seen {
		flags |= 1
	}
	if head.src.hasLSN {
		flags |= 2
	}
	uv(flags)
	uv(uint64(head.src.lsn))
	uv(uint64(len(head.src.stale)))
	for _, v := range head.src.stale {
		str(v)
	}
	behind := make([]string, 0, len(head.src.behind))
	for v := range head.src.behind {
		behind = append(behind, v)
	}
	slices.Sort(behind)
	uv(uint64(len(behind)))
	for _, v := range behind {
		str(v)
		uv(uint64(head.src.behind[v]))
	}
	uv(uint64(len(caps)))
	for _, vc := range caps {
		str(vc.name)
		str(vc.sel)
		var rows uint64
		vc.rows(func(_, _ string) bool { rows++; return true })
		uv(rows)
		vc.rows(func(k, raw string) bool { str(k); str(raw); return werr == nil })
	}
	if werr != nil {
		return cw.n, werr
	}
	// xxhash's Sum is its Sum64 big endian: the trailer of the checksum format
	if _, err := bw.Write(d.Sum(nil)); err != nil {
		return cw.n, err
	}
	err := bw.Flush()
	return cw.n, err
}

// stateSink receives the content of a state file as it is read.
type stateSink interface {
	view(name string) (ok bool)              // false: the file names a view not registered
	reserve(view string, rows int)           // the row count of the view just accepted
	row(view string, key string, raw []byte) // a row of the last accepted view (key and raw alias the file)
}

// readState verifies a whole state file (checksum first, or with key the MAC: see the
// layout above for which files each reader refuses) and then streams its rows to sink, which must not make them visible before readState returned nil. Keys and values
// alias b (no copy per row): b must never be modified afterwards. The loaded view thus
// keeps the file's buffer alive until every row read from it has been replaced (its
// keys and raw values would take as much memory if copied).
func readState(b []byte, stream string, key []byte, sink stateSink) (stateHead, map[string]bool, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrStateFile, fmt.Sprintf(format, a...))
	}
	version, keyed := 0, false
	if len(b) >= len(stateMagic)+8 {
		switch string(b[:len(stateMagic)]) {
		case stateMagicMAC:
			version, keyed = 5, true
		case stateMagic:
			version = 5
		case stateMagicV4:
			version = 4
		case stateMagicV3:
			version = 3
		case stateMagicV2:
			version = 2
		case stateMagicV1:
			version = 1
		}
	}
	if version == 0 {
		return stateHead{}, nil, bad("not a state file of a known format")
	}
	var body []byte
	switch {
	case key != nil && !keyed:
		return stateHead{}, nil, fmt.Errorf("%w: the file has a checksum, no MAC: written without Config.StateKey, or by anyone who can write the directory", ErrStateAuth)
	case key == nil && keyed:
		return stateHead{}, nil, bad("the file is authenticated by a key (written with Config.StateKey), and this client has none to verify it")
	case keyed:
		if len(b) < len(stateMagicMAC)+sha256.Size {
			return stateHead{}, nil, fmt.Errorf("%w: the file ends before its MAC", ErrStateAuth)
		}
		body = b[:len(b)-sha256.Size]
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		if !hmac.Equal(mac.Sum(nil), b[len(body):]) {
			return stateHead{}, nil, fmt.Errorf("%w: its MAC does not verify: forged, corrupt, or written with another key", ErrStateAuth)
		}
	default:
		body = b[:len(b)-8]
		sum := binary.BigEndian.Uint64(b[len(body):])
		if got := xxhash.Sum64(body); got != sum {
			return stateHead{}, nil, bad("checksum %016x, content hashes to %016x (corrupt or truncated)", sum, got)
		}
	}
	p := len(stateMagic)
	uv := func() (uint64, bool) {
		x, n := binary.Uvarint(body[p:])
		if n <= 0 {
			return 0, false
		}
		p += n
		return x, true
	}
	str := func() ([]byte, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(body)-p) {
			return nil, false
		}
		out := body[p : p+int(n)]
		p += int(n)
		return out, true
	}
	st, ok := str()
	if !ok {
		return stateHead{}, nil, bad("stream name")
	}
	if string(st) != stream {
		return stateHead{}, nil, bad("file of stream %q, client of stream %q", st, stream)
	}
	var topic []byte
	if version >= 3 {
		if topic, ok = str(); !ok || len(topic) > 64 {
			return stateHead{}, nil, bad("topic ID")
		}
	}
	index, n := binary.Varint(body[p:])
	if n <= 0 || index < 0 {
		return stateHead{}, nil, bad("index")
	}
	p += n
	head := stateHead{index: index, topic: string(topic), version: version, body: len(body)}
	if version >= 2 {
		flags, ok1 := uv()
		lsn, ok2 := uv()
		nstale, ok3 := uv()
		if !ok1 || !ok2 || !ok3 || flags > 3 || flags == 2 || (flags == 0 && nstale > 0) || nstale > 1<<16 {
			return stateHead{}, nil, bad("source state")
		}
		head.src = sourceState{seen: flags&1 != 0, hasLSN: flags&2 != 0, lsn: LSN(lsn)}
		for range nstale {
			name, ok := str()
			if !ok || !record.ValidViewName(string(name)) {
				return stateHead{}, nil, bad("stale view name")
			}
			head.src.stale = append(head.src.stale, string(name))
		}
	}
	if version >= 4 {
		nb, ok := uv()
		if !ok || nb > 1<<16 || (!head.src.hasLSN && nb > 0) {
			return stateHead{}, nil, bad("views behind")
		}
		for range nb {
			name, ok1 := str()
			lsn, ok2 := uv()
			if !ok1 || !ok2 || !record.ValidViewName(string(name)) {
				return stateHead{}, nil, bad("view behind")
			}
			if head.src.behind == nil {
				head.src.behind = map[string]LSN{}
			}
			head.src.behind[string(name)] = LSN(lsn)
		}
	}
	nv, ok := uv()
	if !ok || nv > 1<<16 {
		return stateHead{}, nil, bad("view count")
	}
	seen := map[string]bool{}
	for range nv {
		name, ok := str()
		if !ok {
			return stateHead{}, nil, bad("view name")
		}
		if _, dup := seen[string(name)]; dup {
			return stateHead{}, nil, bad("view %q twice", name)
		}
		vname := string(name)
		var sel []byte
		if version >= 5 {
			if sel, ok = str(); !ok {
				return stateHead{}, nil, bad("selection of %q", name)
			}
		}
		keep := sink.view(vname)
		seen[vname] = keep
		if ss, isSel := sink.(selSink); isSel && keep {
			ss.selection(vname, string(sel))
		}
		rows, ok := uv()
		if !ok || rows > uint64(len(body)) {
			return stateHead{}, nil, bad("row count of %q", name)
		}
		if keep {
			sink.reserve(vname, int(rows))
		}
		cs, _ := sink.(chunkSink)
		for i := range rows {
			if keep && cs != nil && i%stagedChunk == 0 {
				cs.chunkAt(vname, p)
			}
			k, ok1 := str()
			raw, ok2 := str()
			if !ok1 || !ok2 {
				return stateHead{}, nil, bad("row of %q", name)
			}
			if keep {
				sink.row(vname, aliasString(k), raw)
			}
		}
	}
	if p != len(body) {
		return stateHead{}, nil, bad("%d trailing bytes before the checksum", len(body)-p)
	}
	return head, seen, nil
}

// stateLoad is the loading of the state file at Start, on a goroutine of its own, so that
// the connection goroutine subscribes (resume index from the verified file) while the rows
// are decoded and the views built: the connection and the first frames' wait overlap the
// load. The connection goroutine applies nothing before done.
type stateLoad struct {
	verified chan struct{} // closed once index is known
	index    int64         // the file's applied index; -1: no usable file (bootstrap)
	topic    string        // the topic ID it is an offset of ("": unknown)
	done     chan struct{} // closed once the views hold the file's state (or there is none)
}

func newStateLoad() *stateLoad {
	return &stateLoad{verified: make(chan struct{}), done: make(chan struct{}), index: -1}
}

// chunkSink, when a stateSink implements it, learns the offset (in the file) of every
// stagedChunk-th row of each accepted view.
type chunkSink interface{ chunkAt(view string, off int) }

// selSink, when a stateSink implements it, learns the selection each accepted view was
// saved with.
type selSink interface{ selection(view, sel string) }

// fileView is where an accepted view's rows are in a verified state file.
type fileView struct {
	sel  string // the selection its rows are of (Selection.String)
	rows int
	offs []int // offsets of rows 0, stagedChunk, 2×stagedChunk, …
}

// checkSink accepts the views a client registered, discards the rows and records where
// each view's row chunks start (verification pass).
type checkSink struct {
	c     *Client
	views map[string]*fileView
}

func (k *checkSink) view(name string) bool {
	_, ok := k.c.byName[name]
	if ok {
		k.views[name] = &fileView{}
	}
	return ok
}
func (k *checkSink) reserve(view string, rows int) { k.views[view].rows = rows }
func (k *checkSink) selection(view, sel string)    { k.views[view].sel = sel }
func (*checkSink) row(string, string, []byte)      {}
func (k *checkSink) chunkAt(view string, off int) {
	fv := k.views[view]
	fv.offs = append(fv.offs, off)
}

// verifyState verifies a whole state file (see readState) for client c and returns its
// head and where each registered view's rows are; every registered view must be there.
func verifyState(data []byte, c *Client) (stateHead, map[string]*fileView, error) {
	sink := &checkSink{c: c, views: map[string]*fileView{}}
	head, _, err := readState(data, c.cfg.Stream, c.cfg.StateKey, sink)
	if err != nil {
		return stateHead{index: -1}, nil, err
	}
	for _, v := range c.views {
		fv := sink.views[v.viewName()]
		if fv == nil {
			return stateHead{index: -1}, nil, fmt.Errorf("%w: view %q is not in the file", ErrStateFile, v.viewName())
		}
		if now := v.Selection().String(); fv.sel != now {
			return stateHead{index: -1}, nil, fmt.Errorf("%w: view %q was saved with selection %q, the client now selects %q",
				ErrStateFile, v.viewName(), fv.sel, now)
		}
	}
	head.src.stale = slices.DeleteFunc(head.src.stale, func(v string) bool { return c.byName[v] == nil })
	return head, sink.views, nil
}

// loadState loads the state file, if any. It first reads and verifies the whole file
// (checksum, stream, structure, every registered view present) and publishes its index
// for the connection goroutine; anything wrong is reported and the client starts empty
// (snapshot bootstrap). It then stages, decodes and builds the views under applyMu.
func (c *Client) loadState(l *stateLoad) {
	defer close(l.done)
	start := time.Now()
	data, err := os.ReadFile(c.statePath())
	var head stateHead
	var views map[string]*fileView
	if err == nil {
		head, views, err = verifyState(data, c)
	}
	if err != nil {
		close(l.verified)
		switch {
		case errors.Is(err, ErrStateAuth):
			// Not a corrupt file but one that Config.StateKey does not vouch for: someone
			// else wrote it, or the key changed. Said as such, for whoever watches.
			c.log.Error("state file refused: not authenticated by the state key; bootstrapping from a snapshot", "path", c.statePath(), "err", err)
			if h := c.opts.hooks.OnResync; h != nil {
				h("state file not authenticated")
			}
		case !errors.Is(err, os.ErrNotExist):
			c.log.Error("state file ignored; bootstrapping from a snapshot", "path", c.statePath(), "err", err)
			if h := c.opts.hooks.OnResync; h != nil {
				h("state file unusable")
			}
		}
		return
	}
	index := head.index
	l.index, l.topic = index, head.topic
	close(l.verified)
	if head.version < 3 {
		c.log.Info("state file of an older format, without the topic ID: resuming without a topic check",
			"path", c.statePath(), "format", head.version)
	}
	c.applyMu.Lock()
	body := data[:head.body] // the checksum or MAC is not part of any row
	rows := 0
	for _, v := range c.views {
		fv := views[v.viewName()]
		v.loadRows(body, fv.offs, fv.rows)
		v.endReplace(index)
	}
	c.wsrc = head.src
	c.topic = head.topic
	c.publish(index)
	for _, v := range c.views {
		rows += v.stats().Len
	}
	c.applyMu.Unlock()
	c.log.Info("state file loaded; resuming", "index", index, "rows", rows, "source_position", head.src.lsn, "took", time.Since(start))
	for _, v := range c.views {
		if err := v.flushChanges(c.ctx); err != nil {
			return
		}
	}
	c.markHandedOver()
}

// resumeIndex is the index to resume from and the topic ID it is an offset of: the applied
// index (-1: none), or while the state file is still loading, the verified file's. Once the
// load is over the applied index is the only authority (a repair may have reset it to -1
// since). It waits for the file's verification.
func (c *Client) resumeIndex(ctx context.Context) (int64, string, error) {
	l := c.load
	if l != nil {
		select {
		case <-l.done:
		default:
			select {
			case <-l.verified:
			case <-ctx.Done():
				return -1, "", ctx.Err()
			}
			// The load sets applied to l.index when it succeeds, and nothing else changes
			// applied before this goroutine handles a frame, which it does only after the
			// load.
			return l.index, l.topic, nil
		}
	}
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	return c.applied.Load(), c.topic, nil
}

// waitLoaded waits until the state file's load (if any) is over.
func (c *Client) waitLoaded(ctx context.Context) error {
	l := c.load
	if l == nil {
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) persistLoop(ctx interface {
	Done() <-chan struct{}
}) {
	t := time.NewTicker(c.cfg.PersistInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.persist()
		}
	}
}
