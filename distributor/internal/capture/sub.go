package capture

import (
	"context"
	"time"
)

// Sub is one subscriber of a Receiver: the transactions that touch its tables (with only
// their changes of those tables), and the position it confirmed. The slot is confirmed at
// the lowest position its subscribers confirmed.
type Sub struct {
	r         *Receiver
	tables    map[uint32]bool
	txns      []*Txn
	pending   int
	confirmed LSN
}

// Subscribe adds a subscriber to the transactions that touch tables. Call it before Run.
func (r *Receiver) Subscribe(tables []uint32) *Sub {
	s := &Sub{r: r, tables: map[uint32]bool{}, confirmed: r.cfg.Start}
	for _, t := range tables {
		s.tables[t] = true
	}
	r.mu.Lock()
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	return s
}

// filter returns t with only the changes of s's tables, or nil when none is left.
func (s *Sub) filter(t *Txn) *Txn {
	all := true
	for _, c := range t.Changes {
		all = all && s.tables[c.Rel]
	}
	for _, rel := range t.Truncated {
		all = all && s.tables[rel]
	}
	if all {
		return t
	}
	f := &Txn{Xid: t.Xid, CommitLSN: t.CommitLSN, EndLSN: t.EndLSN, CommitTime: t.CommitTime}
	for _, c := range t.Changes {
		if s.tables[c.Rel] {
			f.Changes = append(f.Changes, c)
			f.bytes += len(c.Old) + len(c.New) + 48
		}
	}
	for _, rel := range t.Truncated {
		if s.tables[rel] {
			f.Truncated = append(f.Truncated, rel)
		}
	}
	if len(f.Changes) == 0 && len(f.Truncated) == 0 {
		return nil
	}
	return f
}

// Pending waits until a transaction is buffered, then returns the number buffered; it
// returns 0 and ctx's error when ctx ends first, or the stream's error.
func (s *Sub) Pending(ctx context.Context) (int, error) {
	r := s.r
	for {
		r.mu.Lock()
		n, err, changed := len(s.txns), r.err, r.changed
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return n, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Take waits until the server has decoded (and the receiver received) the WAL up to at
// least `through`, pinging it for its position, then removes and returns every buffered
// transaction of s with the position decoded through: every commit at or before it that
// touches s's tables is among the transactions returned or was taken earlier.
func (s *Sub) Take(ctx context.Context, through LSN) ([]*Txn, LSN, error) {
	txns, got, _, err := s.TakeSome(ctx, through, 0)
	return txns, got, err
}

// TakeSome is Take that returns early, with done false, once min or more transactions of
// s are buffered (min > 0): the caller can work on them while the rest arrive. done is true
// when the returned transactions complete the WAL up to through, as Take's.
func (s *Sub) TakeSome(ctx context.Context, through LSN, min int) (txns []*Txn, got LSN, done bool, err error) {
	r := s.r
	// One ping asks the server for its position; while transactions stream in, each of
	// them moves the position, and a ping per wake-up would cost the receiver and the
	// server a status message per transaction. A quiet 5 ms pings again: a reply may have
	// been sent before the request was read.
	pinged := false
	var quiet *time.Timer
	defer func() {
		if quiet != nil {
			quiet.Stop()
		}
	}()
	for {
		r.mu.Lock()
		got, err, changed := r.through, r.err, r.changed
		done := err == nil && got >= through
		if done || err == nil && min > 0 && len(s.txns) >= min {
			txns := s.txns
			r.pending -= s.pending
			s.txns, s.pending = nil, 0
			close(r.room)
			r.room = make(chan struct{})
			r.mu.Unlock()
			return txns, got, done, nil
		}
		ping := !pinged && err == nil
		if ping {
			r.ping = true
		}
		r.mu.Unlock()
		if err != nil {
			return nil, 0, false, err
		}
		if ping {
			r.interrupt()
			pinged = true
		}
		if quiet == nil {
			quiet = time.NewTimer(5 * time.Millisecond)
		} else {
			quiet.Reset(5 * time.Millisecond)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		case <-quiet.C:
			pinged = false
		}
	}
}

// Notify returns a channel closed at the next change of the buffered transactions, of
// Through, or of the stream's error.
func (s *Sub) Notify() <-chan struct{} { return s.r.Notify() }

// Notify returns a channel closed at the next change of the buffered transactions, of
// Through, or of the stream's error.
func (r *Receiver) Notify() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Buffered returns the number of s's transactions received and not yet taken.
func (s *Sub) Buffered() int {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return len(s.txns)
}

// Err returns the error that stopped the stream, or nil while it runs.
func (s *Sub) Err() error { return s.r.Err() }

// Err returns the error that stopped the stream, or nil while it runs.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Through is the position the server has decoded through, as last reported.
func (r *Receiver) Through() LSN {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.through
}

// RelationChanged is the receiver's RelationChanged.
func (s *Sub) RelationChanged() bool { return s.r.RelationChanged() }

// Confirm reports that s durably processed everything up to pos: once every subscriber
// has, the slot may release the WAL before it. It is sent at once.
func (s *Sub) Confirm(pos LSN) {
	r := s.r
	r.mu.Lock()
	if pos > s.confirmed {
		s.confirmed = pos
		r.ping = true // carries the new position now
	}
	r.mu.Unlock()
	r.interrupt()
}

// Confirmed returns the last position passed to Confirm (or the start position).
func (s *Sub) Confirmed() LSN {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.confirmed
}

// Ping asks the server for its decoded position (Through moves when it answers).
func (s *Sub) Ping() { s.r.Ping() }
