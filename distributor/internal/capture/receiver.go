package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// LSN is a PostgreSQL WAL position.
type LSN = pglogrepl.LSN

// Op is the kind of a row change.
type Op byte

// Row change kinds.
const (
	OpInsert Op = 'I'
	OpUpdate Op = 'U'
	OpDelete Op = 'D'
)

// Identity is a tuple of column values (binary, as the table's columns send them) — a
// row's identity, or the values a view's mapping reads — encoded as one comparable
// string: per column a 4-byte big-endian length (0xFFFFFFFF for NULL) and the bytes. ""
// means none.
type Identity string

// Values splits an identity into its column values (nil for NULL).
func (id Identity) Values() [][]byte {
	var out [][]byte
	b := []byte(id)
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if n == 0xFFFFFFFF {
			out = append(out, nil)
			continue
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out
}

// AppendIdentity appends one column value to an identity being built.
func AppendIdentity(dst []byte, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// Change is one changed row of a published table: the values of the table's captured
// columns (TableColumns: its identity, then the columns views map it by) before (updates,
// deletes) and after (inserts, updates). An update whose old row pgoutput did not send
// (an unchanged identity, not REPLICA IDENTITY FULL) has Old "": its identity is New's.
// Unknown is set when a value could not be read (a toasted value pgoutput did not resend,
// the old value of a column outside the identity that it did not send, an identity
// column the table does not have any more): the views that read the table must re-read
// it in full. Missing lists the captured columns (by their index in TableColumns.Names)
// that the table does not have any more (dropped or renamed: the relation message pgoutput
// sent before the change lacks their names); their values read as NULL, and only the
// views that map the table through them must re-read it. Oversize lists the captured
// values (old or new) longer than ReceiverConfig.MaxValueBytes: not copied, they read as
// NULL too, and the views that map the table through their columns must re-read it (an
// oversize identity value makes the change Unknown). (Unknown is next to Op, with no
// padding of its own: a transaction of a million rows holds a million Changes.)
type Change struct {
	Rel      uint32
	Op       Op
	Unknown  bool
	Old      Identity
	New      Identity
	Missing  []int
	Oversize []OversizeValue
}

// OversizeValue is a captured column's value that the receiver refused to copy: longer
// than ReceiverConfig.MaxValueBytes, it could not be part of a record anyway.
type OversizeValue struct {
	Table  string // schema.name, as pgoutput named it
	Column string // the captured column's name
	Index  int    // its index in TableColumns.Names
	Bytes  int    // the value's length
}

// Txn is one committed source transaction's changes to the published tables.
type Txn struct {
	Xid        uint32
	CommitLSN  LSN // the commit record's position
	EndLSN     LSN // the end of the commit record: every commit up to here is decoded
	CommitTime time.Time
	Changes    []Change
	Truncated  []uint32 // tables truncated by the transaction
	bytes      int
}

// TableColumns are the columns of a table whose values its changes carry: its identity's
// first (Identity of them), then the others views map its changes by, whose old values
// pgoutput sends only under REPLICA IDENTITY FULL.
type TableColumns struct {
	Names    []string
	Identity int
}

// Relation is what pgoutput said about a table.
type relation struct {
	oid     uint32
	name    string
	cols    []int // positions of the captured columns in the table's tuples (-1: dropped)
	n       int   // of which the identity's
	missing []int // the captured columns without a position (shared by its changes: never changed)
	// identity: the table's replica identity is the captured one. When it is not (ALTER
	// TABLE … REPLICA IDENTITY, a new primary key), an old key tuple holds other columns:
	// every change is Unknown.
	identity bool
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	Slot        string
	Publication string
	Start       LSN // where streaming starts (0: the slot's confirmed position)
	// Tables gives, per table OID, the columns a change carries. Changes of other tables
	// are ignored.
	Tables map[uint32]TableColumns
	// MaxPendingBytes bounds the identities buffered and not yet taken (default 256 MiB);
	// past it the receiver stops reading and the server holds the WAL.
	MaxPendingBytes int
	// StatusInterval between status updates to the server (default 1s).
	StatusInterval time.Duration
	// MaxValueBytes bounds a captured value (0: no bound): a longer one is not copied out
	// of the message that carries it, and its change lists it in Oversize. The
	// distributor passes its record size limit, which such a value cannot fit in.
	MaxValueBytes int
}

// Receiver streams a slot's committed transactions to its subscribers (Sub: one per
// stream reading the slot; several streams may share a slot). Run owns the connection;
// the other methods, and the Subs', are safe from any goroutine.
type Receiver struct {
	conn *pgconn.PgConn
	cfg  ReceiverConfig

	mu      sync.Mutex
	subs    []*Sub
	pending int           // bytes of the subscribers' transactions
	through LSN           // the server decoded (and we received) everything up to here
	start   LSN           // where streaming started
	ping    bool          // a status update with reply requested is wanted
	changed chan struct{} // closed and replaced when txns, through or err change
	room    chan struct{} // closed and replaced when pending shrinks
	err     error

	// Run's blocked read is bounded by the connection's read deadline rather than by a
	// context per message: a context with a deadline for each of millions of messages
	// (and pgconn's watch of it) cost about a third of the receive path. A wake sets the
	// deadline to now.
	wakeMu   sync.Mutex
	nc       net.Conn  // the replication connection's socket while Run reads it
	deadline time.Time // the read deadline last set by Run
	woken    bool      // a wake moved the deadline since Run last set it

	// reanalyze is set once a relation message shows a table whose replica identity is not
	// the captured one: the views' analysis is out of date (RelationChanged).
	reanalyze bool

	// Run's own state
	collect bool // a huge message was read: collect once pgconn let its buffer go
	rels    map[uint32]*relation
	cur     *Txn
	buf     []byte
	// Transactions the server streams while they run (pgoutput's streaming, for those
	// past logical_decoding_work_mem): by top-level xid until their stream commit or
	// abort. inStream: between a stream start and its stop, where cur is streams[xid].
	streams  map[uint32]*streamed
	inStream bool
	curSub   *streamed
}

// streamed is an in-progress transaction the server streams: its changes so far, in runs
// of one (sub)transaction each, so that a subtransaction's abort can drop its changes.
type streamed struct {
	t    *Txn
	runs []subRun
}

type subRun struct {
	xid   uint32
	start int // index of its first change in t.Changes
}

// note records that the next change belongs to (sub)transaction xid.
func (s *streamed) note(xid uint32) {
	if n := len(s.runs); n == 0 || s.runs[n-1].xid != xid {
		s.runs = append(s.runs, subRun{xid: xid, start: len(s.t.Changes)})
	}
}

// abortSub drops the changes of subtransaction xid.
func (s *streamed) abortSub(xid uint32) {
	var keep []Change
	var runs []subRun
	bytes := 0
	for i, r := range s.runs {
		end := len(s.t.Changes)
		if i+1 < len(s.runs) {
			end = s.runs[i+1].start
		}
		if r.xid == xid {
			continue
		}
		if n := len(runs); n == 0 || runs[n-1].xid != r.xid {
			runs = append(runs, subRun{xid: r.xid, start: len(keep)})
		}
		for _, c := range s.t.Changes[r.start:end] {
			bytes += len(c.Old) + len(c.New) + 48
		}
		keep = append(keep, s.t.Changes[r.start:end]...)
	}
	s.t.Changes, s.runs, s.t.bytes = keep, runs, bytes
}

// hugeMessage is the size of a message from which the receiver has the memory it held
// collected at once.
const hugeMessage = 64 << 20

// ErrReceiverStopped is returned by Take and Pending after Run returned.
var ErrReceiverStopped = errors.New("capture: replication stream stopped")

// NewReceiver returns a receiver for conn, a replication connection
// (replication=database). Run starts streaming.
func NewReceiver(conn *pgconn.PgConn, cfg ReceiverConfig) *Receiver {
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = 256 << 20
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	return &Receiver{conn: conn, cfg: cfg, changed: make(chan struct{}), room: make(chan struct{}),
		through: cfg.Start, start: cfg.Start, rels: map[uint32]*relation{}, streams: map[uint32]*streamed{}}
}

// confirmedLocked is the position to report to the server: the lowest confirmed by a
// subscriber. r.mu held.
func (r *Receiver) confirmedLocked() LSN {
	if len(r.subs) == 0 {
		return r.start
	}
	c := r.subs[0].confirmed
	for _, s := range r.subs[1:] {
		c = min(c, s.confirmed)
	}
	return c
}

// Run starts the replication and receives until ctx ends or the stream fails; it returns
// the error (ctx's included), which Take and Pending then report.
func (r *Receiver) Run(ctx context.Context) (err error) {
	defer func() {
		r.mu.Lock()
		if r.err == nil {
			r.err = fmt.Errorf("%w: %w", ErrReceiverStopped, err)
		}
		r.signalLocked()
		close(r.room)
		r.room = make(chan struct{})
		r.mu.Unlock()
	}()
	// Streaming (protocol 2): a large transaction is sent while it runs, once it is past
	// the server's logical_decoding_work_mem, rather than decoded from the server's spill
	// files after its commit — which made a transaction of a million rows reach the
	// receiver seconds after it committed.
	args, err := pluginArgs(r.cfg.Publication)
	if err == nil {
		err = CheckSlotName(r.cfg.Slot)
	}
	if err != nil {
		return err
	}
	if err := pglogrepl.StartReplication(ctx, r.conn, pgx.Identifier{r.cfg.Slot}.Sanitize(), r.cfg.Start, pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		return fmt.Errorf("capture: start replication on slot %q: %w", r.cfg.Slot, err)
	}
	r.wakeMu.Lock()
	r.nc = r.conn.Conn()
	r.wakeMu.Unlock()
	defer func() {
		r.wakeMu.Lock()
		r.nc.SetReadDeadline(time.Time{})
		r.nc = nil
		r.wakeMu.Unlock()
	}()
	stop := context.AfterFunc(ctx, r.interrupt)
	defer stop()
	lastStatus := time.Time{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.waitRoom(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		ping, confirmed := r.ping, r.confirmedLocked()
		r.ping = false
		r.mu.Unlock()
		if ping || time.Since(lastStatus) >= r.cfg.StatusInterval {
			if err := r.sendStatus(confirmed, ping); err != nil {
				return err
			}
			lastStatus = time.Now()
		}
		due := lastStatus.Add(r.cfg.StatusInterval)
		r.wakeMu.Lock()
		if r.woken || !due.Equal(r.deadline) {
			r.woken, r.deadline = false, due
			r.nc.SetReadDeadline(due)
		}
		r.wakeMu.Unlock()
		// A ping or ctx's end that woke us before the deadline was set again would be
		// lost until the deadline: both are recorded before the wake, so look again.
		r.mu.Lock()
		again := r.ping
		r.mu.Unlock()
		if again || ctx.Err() != nil {
			continue
		}
		msg, err := r.conn.ReceiveMessage(context.Background())
		if r.collect {
			// pgconn reads a message whole into a buffer of its size, which it lets go at
			// the next read. Collected by the GC's pacing, such buffers of a few huge rows
			// in a row (their re-reads, the next huge message) add up to several times a
			// row's size before a collection frees them; a forced one frees it now.
			r.collect = false
			runtime.GC()
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if pgconn.Timeout(err) && !r.conn.IsClosed() {
				continue // status due, or woken to send one
			}
			return fmt.Errorf("capture: replication stream: %w", err)
		}
		if err := r.handle(msg); err != nil {
			return err
		}
	}
}

// waitRoom blocks while the buffered transactions are over MaxPendingBytes.
func (r *Receiver) waitRoom(ctx context.Context) error {
	for {
		r.mu.Lock()
		full, room := r.pending > r.cfg.MaxPendingBytes, r.room
		r.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Receiver) sendStatus(pos LSN, reply bool) error {
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ReplyRequested: reply})
	if err != nil {
		return fmt.Errorf("capture: status update: %w", err)
	}
	return nil
}

func (r *Receiver) handle(msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return nil
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("capture: keepalive: %w", err)
			}
			r.advance(k.ServerWALEnd)
			if k.ReplyRequested {
				r.mu.Lock()
				r.ping = true
				r.mu.Unlock()
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("capture: xlog data: %w", err)
			}
			r.collect = len(m.Data) >= hugeMessage
			return r.decode(x.WALData)
		}
		return nil
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("capture: replication stream: %w", pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return errors.New("capture: the server ended the replication stream")
	}
	return nil
}

// decode handles one pgoutput message.
func (r *Receiver) decode(data []byte) error {
	msg, err := parseMessage(data, r.inStream)
	if err != nil {
		return fmt.Errorf("capture: pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		r.cur = &Txn{Xid: m.Xid, CommitTime: m.CommitTime}
	case *pglogrepl.RelationMessageV2:
		r.relation(&m.RelationMessage)
	case *pglogrepl.InsertMessageV2:
		r.noteSub(m.Xid)
		r.change(m.RelationID, OpInsert, 0, nil, m.Tuple)
	case *pglogrepl.UpdateMessageV2:
		r.noteSub(m.Xid)
		r.change(m.RelationID, OpUpdate, m.OldTupleType, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessageV2:
		r.noteSub(m.Xid)
		r.change(m.RelationID, OpDelete, m.OldTupleType, m.OldTuple, nil)
	case *pglogrepl.TruncateMessageV2:
		if r.cur != nil {
			for _, id := range m.RelationIDs {
				if _, ok := r.cfg.Tables[id]; ok {
					r.cur.Truncated = append(r.cur.Truncated, id)
				}
			}
		}
	case *pglogrepl.StreamStartMessageV2:
		st := r.streams[m.Xid]
		if st == nil || m.FirstSegment == 1 { // a first segment starts the transaction over
			st = &streamed{t: &Txn{Xid: m.Xid}}
			r.streams[m.Xid] = st
		}
		r.inStream, r.cur, r.curSub = true, st.t, st
	case *pglogrepl.StreamStopMessageV2:
		r.inStream, r.cur, r.curSub = false, nil, nil
	case *pglogrepl.StreamAbortMessageV2:
		if st := r.streams[m.Xid]; st != nil {
			if m.SubXid == m.Xid {
				delete(r.streams, m.Xid)
			} else {
				st.abortSub(m.SubXid)
			}
		}
	case *pglogrepl.StreamCommitMessageV2:
		st := r.streams[m.Xid]
		if st == nil {
			return fmt.Errorf("capture: stream commit of transaction %d, which was not streamed", m.Xid)
		}
		delete(r.streams, m.Xid)
		st.t.CommitTime = m.CommitTime
		r.committed(st.t, m.CommitLSN, m.TransactionEndLSN)
	case *pglogrepl.CommitMessage:
		t := r.cur
		r.cur = nil
		if t == nil {
			return errors.New("capture: commit without begin")
		}
		r.committed(t, m.CommitLSN, m.TransactionEndLSN)
	}
	return nil
}

// noteSub records, in a streamed transaction, the (sub)transaction of the next change.
func (r *Receiver) noteSub(xid uint32) {
	if r.inStream && r.curSub != nil {
		r.curSub.note(xid)
	}
}

// committed hands t, which committed at commitLSN (its record ending at end), to the
// subscribers whose tables it changed.
func (r *Receiver) committed(t *Txn, commitLSN, end LSN) {
	t.CommitLSN, t.EndLSN = commitLSN, end
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(t.Changes) > 0 || len(t.Truncated) > 0 {
		for _, s := range r.subs {
			if f := s.filter(t); f != nil {
				s.txns = append(s.txns, f)
				s.pending += f.bytes
				r.pending += f.bytes
			}
		}
	}
	if t.EndLSN > r.through {
		r.through = t.EndLSN
	}
	r.signalLocked()
}

func (r *Receiver) relation(m *pglogrepl.RelationMessage) {
	tc := r.cfg.Tables[m.RelationID]
	rel := &relation{oid: m.RelationID, name: m.Namespace + "." + m.RelationName, n: tc.Identity, identity: true}
	for j, name := range tc.Names {
		pos := -1
		for i, c := range m.Columns {
			if c.Name == name {
				pos = i
			}
		}
		rel.cols = append(rel.cols, pos) // -1: dropped or renamed
		if pos < 0 {
			rel.missing = append(rel.missing, j)
		}
	}
	// The key flags name the replica identity's columns (all of them under REPLICA
	// IDENTITY FULL, which an old tuple 'O' carries whole: any identity of its columns
	// reads).
	keys := 0
	for _, c := range m.Columns {
		if c.Flags&1 != 0 {
			keys++
		}
	}
	if m.ReplicaIdentity != 'f' {
		for _, pos := range rel.cols[:rel.n] {
			if pos < 0 || m.Columns[pos].Flags&1 == 0 {
				rel.identity = false
			}
		}
		rel.identity = rel.identity && keys == rel.n
	}
	if _, ok := r.cfg.Tables[m.RelationID]; ok && !rel.identity {
		r.mu.Lock()
		r.reanalyze = true
		r.mu.Unlock()
	}
	r.rels[m.RelationID] = rel
}

// RelationChanged reports whether a relation message showed a published table whose
// replica identity is not the one the receiver captures (its changes are Unknown until
// the views are analyzed again, in a new session).
func (r *Receiver) RelationChanged() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reanalyze
}

func (r *Receiver) change(relID uint32, op Op, oldType uint8, old, new *pglogrepl.TupleData) {
	if r.cur == nil {
		return
	}
	if _, ok := r.cfg.Tables[relID]; !ok {
		return
	}
	rel := r.rels[relID]
	c := Change{Rel: relID, Op: op}
	// An old key tuple ('K') holds the identity only; without an old tuple, an update kept
	// its identity. Either way the old values of the other columns are not known.
	if old != nil {
		c.Old, c.Unknown = r.values(rel, old, oldType == 'O', &c)
	} else if op == OpUpdate && rel != nil && len(rel.cols) > rel.n {
		c.Unknown = true
	}
	if new != nil {
		var unknown bool
		c.New, unknown = r.values(rel, new, true, &c)
		c.Unknown = c.Unknown || unknown
	}
	if rel != nil {
		c.Missing = rel.missing
		c.Unknown = c.Unknown || !rel.identity
	}
	r.cur.Changes = append(r.cur.Changes, c)
	r.cur.bytes += len(c.Old) + len(c.New) + 48
}

// values reads the captured columns of tuple t (the identity's only, unless all: an old
// key tuple's other columns are NULLs that stand for nothing); unknown when one is missing.
// A value over MaxValueBytes is added to c.Oversize and read as NULL (unknown if it is an
// identity column's), without a copy.
func (r *Receiver) values(rel *relation, t *pglogrepl.TupleData, all bool, c *Change) (Identity, bool) {
	if rel == nil || len(rel.cols) == 0 {
		return "", true
	}
	if !all && len(rel.cols) > rel.n {
		return "", true
	}
	r.buf = r.buf[:0]
	for i, pos := range rel.cols {
		if pos < 0 && i >= rel.n {
			r.buf = AppendIdentity(r.buf, nil) // a column gone: only its views re-read (Missing)
			continue
		}
		if pos < 0 || pos >= len(t.Columns) {
			return "", true
		}
		col := t.Columns[pos]
		switch col.DataType {
		case pglogrepl.TupleDataTypeBinary:
			if limit := r.cfg.MaxValueBytes; limit > 0 && len(col.Data) > limit {
				c.Oversize = append(c.Oversize, OversizeValue{Table: rel.name, Column: r.cfg.Tables[rel.oid].Names[i], Index: i, Bytes: len(col.Data)})
				if i < rel.n {
					return "", true
				}
				r.buf = AppendIdentity(r.buf, nil)
				continue
			}
			r.buf = AppendIdentity(r.buf, col.Data)
		case pglogrepl.TupleDataTypeNull:
			r.buf = AppendIdentity(r.buf, nil)
		default: // unchanged toast, or text (binary was asked for)
			return "", true
		}
	}
	return Identity(r.buf), false
}

func (r *Receiver) advance(to LSN) {
	r.mu.Lock()
	if to > r.through {
		r.through = to
		r.signalLocked()
	}
	r.mu.Unlock()
}

func (r *Receiver) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Ping asks the server for its decoded position (Through moves when it answers).
func (r *Receiver) Ping() {
	r.mu.Lock()
	r.ping = true
	r.mu.Unlock()
	r.interrupt()
}

func (r *Receiver) interrupt() {
	r.wakeMu.Lock()
	if r.nc != nil {
		r.woken = true
		r.nc.SetReadDeadline(time.Now())
	}
	r.wakeMu.Unlock()
}
