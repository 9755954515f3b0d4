package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
)

// DefaultRecvLogical is where Debian's PostgreSQL 15 packages put pg_recvlogical (the
// server's own version; the one on PATH may be another).
const DefaultRecvLogical = "/usr/lib/postgresql/15/bin/pg_recvlogical"

// RecvLogicalConfig configures a RecvLogical.
type RecvLogicalConfig struct {
	// Bin is the pg_recvlogical to run: DefaultRecvLogical when empty and present, else
	// the one on PATH.
	Bin string
	// DSN is the database's connection string (pg_recvlogical asks for a replication
	// connection itself).
	DSN string
	// Slot is an existing pgoutput slot (CreateSlot) and Publication the publication it
	// streams.
	Slot, Publication string
	// KeepChanges keeps every row change's values (LogicalTxn.Changes); without it only
	// the row count is kept, so that the reader stays far ahead of pg_recvlogical.
	KeepChanges bool
}

// LogicalTxn is a transaction pg_recvlogical received.
type LogicalTxn struct {
	Xid       uint32
	CommitLSN pglogrepl.LSN
	Rows      int       // inserts, updates and deletes
	Received  time.Time // when its commit message was read from pg_recvlogical's output
	Changes   []LogicalChange
}

// LogicalChange is one row change (RecvLogicalConfig.KeepChanges).
type LogicalChange struct {
	Op      Op     // OpInsert, OpUpdate or OpDelete
	Table   string // schema.name
	Columns []string
	// Values are the new row's columns (a delete's: the old key, the other columns nil),
	// in pgoutput's binary format as the distributor asks for it; nil is NULL.
	Values [][]byte
}

// RecvLogical runs pg_recvlogical on a slot with pgoutput, with the options the
// distributor streams with (protocol version 1, binary), and records when each
// transaction's commit arrived: the bare decode path of PostgreSQL, the floor of WAL
// capture.
type RecvLogical struct {
	cfg     RecvLogicalConfig
	cmd     *exec.Cmd
	started time.Time
	readers sync.WaitGroup

	mu        sync.Mutex
	streaming time.Time
	txns      map[uint32]*LogicalTxn
	rows      int64
	changed   chan struct{} // closed and replaced at each commit and at the end
	err       error         // the output's parse error, or why it ended
	stderr    []string      // its last lines
}

// StartRecvLogical starts pg_recvlogical streaming cfg.Slot from the slot's position.
func StartRecvLogical(cfg RecvLogicalConfig) (*RecvLogical, error) {
	bin := cfg.Bin
	if bin == "" {
		bin = "pg_recvlogical"
		if _, err := os.Stat(DefaultRecvLogical); err == nil {
			bin = DefaultRecvLogical
		}
	}
	// -F 0: no fsync of the output (a pipe); --no-loop: a lost connection ends it rather
	// than being retried unseen; -v: it says when streaming starts.
	cmd := exec.Command(bin, "-d", cfg.DSN, "-S", cfg.Slot, "--start", "-f", "-", "-F", "0", "--no-loop", "-v",
		"-o", "proto_version=1", "-o", "publication_names="+cfg.Publication, "-o", "binary=true")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	r := &RecvLogical{cfg: cfg, cmd: cmd, txns: map[uint32]*LogicalTxn{}, changed: make(chan struct{})}
	r.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", bin, err)
	}
	r.readers.Go(func() { r.readStderr(stderr) })
	r.readers.Go(func() { r.readOutput(stdout) })
	return r, nil
}

func (r *RecvLogical) readStderr(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		line := sc.Text()
		r.mu.Lock()
		if strings.Contains(line, "starting log streaming") && r.streaming.IsZero() {
			r.streaming = time.Now()
		}
		r.stderr = append(r.stderr, line)
		if len(r.stderr) > 20 {
			r.stderr = r.stderr[1:]
		}
		r.mu.Unlock()
	}
}

func (r *RecvLogical) readOutput(rd io.Reader) {
	err := r.parse(newMessageReader(rd))
	r.mu.Lock()
	r.err = err
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	_, _ = io.Copy(io.Discard, rd) // let pg_recvlogical finish writing and exit
}

// parse reads the messages until the output ends, recording each transaction.
func (r *RecvLogical) parse(mr *messageReader) error {
	rels := map[uint32]*pglogrepl.RelationMessage{}
	var cur *LogicalTxn
	for {
		b, err := mr.next()
		if err != nil {
			return err
		}
		switch b[0] {
		case 'B':
			m, err := pglogrepl.Parse(b)
			if err != nil {
				return err
			}
			cur = &LogicalTxn{Xid: m.(*pglogrepl.BeginMessage).Xid}
			// Its stderr, read on another goroutine, may say it started streaming after its
			// first output was read here: streaming began no later than that output.
			r.mu.Lock()
			if r.streaming.IsZero() {
				r.streaming = time.Now()
			}
			r.mu.Unlock()
		case 'C':
			now := time.Now()
			m, err := pglogrepl.Parse(b)
			if err != nil {
				return err
			}
			if cur == nil {
				return errors.New("pgoutput: commit without begin")
			}
			cur.CommitLSN, cur.Received = m.(*pglogrepl.CommitMessage).CommitLSN, now
			r.mu.Lock()
			r.txns[cur.Xid] = cur
			r.rows += int64(cur.Rows)
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
			cur = nil
		case 'I', 'U', 'D':
			if cur == nil {
				return fmt.Errorf("pgoutput: %q outside a transaction", b[0])
			}
			cur.Rows++
			if r.cfg.KeepChanges {
				c, err := change(b, rels)
				if err != nil {
					return err
				}
				cur.Changes = append(cur.Changes, c)
			}
		case 'R':
			m, err := pglogrepl.Parse(b)
			if err != nil {
				return err
			}
			rel := m.(*pglogrepl.RelationMessage)
			rels[rel.RelationID] = rel
		}
	}
}

// change parses an insert, update or delete message.
func change(b []byte, rels map[uint32]*pglogrepl.RelationMessage) (LogicalChange, error) {
	m, err := pglogrepl.Parse(b)
	if err != nil {
		return LogicalChange{}, err
	}
	var c LogicalChange
	var relID uint32
	var tuple *pglogrepl.TupleData
	switch m := m.(type) {
	case *pglogrepl.InsertMessage:
		c.Op, relID, tuple = OpInsert, m.RelationID, m.Tuple
	case *pglogrepl.UpdateMessage:
		c.Op, relID, tuple = OpUpdate, m.RelationID, m.NewTuple
	case *pglogrepl.DeleteMessage:
		c.Op, relID, tuple = OpDelete, m.RelationID, m.OldTuple
	}
	rel := rels[relID]
	if rel == nil {
		return c, fmt.Errorf("pgoutput: change of relation %d before its description", relID)
	}
	c.Table = rel.Namespace + "." + rel.RelationName
	for i, col := range rel.Columns {
		c.Columns = append(c.Columns, col.Name)
		var v []byte
		if tuple != nil && i < len(tuple.Columns) {
			if tc := tuple.Columns[i]; tc.DataType == pglogrepl.TupleDataTypeBinary || tc.DataType == pglogrepl.TupleDataTypeText {
				v = tc.Data
			}
		}
		c.Values = append(c.Values, v)
	}
	return c, nil
}

// Streaming is when pg_recvlogical started streaming (its verbose message, or its first
// transaction if that was read first), or when it was started if neither came yet.
func (r *RecvLogical) Streaming() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streaming.IsZero() {
		return r.started
	}
	return r.streaming
}

// Txn returns the transaction xid if its commit was received.
func (r *RecvLogical) Txn(xid uint32) (LogicalTxn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.txns[xid]
	if !ok {
		return LogicalTxn{}, false
	}
	return *t, true
}

// Rows is the number of row changes received in committed transactions.
func (r *RecvLogical) Rows() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rows
}

// WaitXids waits until the commits of every transaction of xids were received.
func (r *RecvLogical) WaitXids(ctx context.Context, xids []uint32, timeout time.Duration) error {
	deadline := time.After(timeout)
	i := 0
	for {
		r.mu.Lock()
		for i < len(xids) && r.txns[xids[i]] != nil {
			i++
		}
		changed, err, stderr := r.changed, r.err, strings.Join(r.stderr, " | ")
		r.mu.Unlock()
		if i == len(xids) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bench: pg_recvlogical's output ended before transaction %d: %w (stderr: %s)", xids[i], err, stderr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("bench: pg_recvlogical: %d of %d transactions not received within %v (stderr: %s)", len(xids)-i, len(xids), timeout, stderr)
		}
	}
}

// Stop stops pg_recvlogical (SIGINT: it reports its position and exits) and waits for it.
// It returns the output's parse error, if there was one.
func (r *RecvLogical) Stop() error {
	_ = r.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { r.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	_ = r.cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil && !errors.Is(r.err, io.EOF) && !errors.Is(r.err, os.ErrClosed) {
		return fmt.Errorf("bench: pg_recvlogical's output: %w", r.err)
	}
	return nil
}
