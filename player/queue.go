package player

import "time"

// State is a target queue's state (the paper's Algorithm 1).
type State int

// The four states of a target queue.
const (
	// StateN (normal): entries come from the main stream through the normal queue.
	StateN State = iota
	// StateRF (recovery fetching): a recovery fetcher (snapshot, history, Kafka) fills the
	// catch-up queue; main entries wait in the normal queue.
	StateRF
	// StateFC (fetching completed): the recovery fetcher is done; the catch-up queue drains
	// first, then the queue becomes N.
	StateFC
	// StateS (suspended): nothing is pushed; both queues are empty.
	StateS
)

func (s State) String() string {
	switch s {
	case StateN:
		return "N"
	case StateRF:
		return "RF"
	case StateFC:
		return "FC"
	case StateS:
		return "S"
	}
	return "?"
}

// fifo is a slice-backed FIFO of items.
type fifo struct {
	items []*item
	head  int
	bytes int64
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(it *item) {
	if f.head > 0 && f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	}
	f.items = append(f.items, it)
	f.bytes += int64(it.size())
}

func (f *fifo) front() *item {
	if f.len() == 0 {
		return nil
	}
	return f.items[f.head]
}

func (f *fifo) pop() *item {
	it := f.items[f.head]
	f.items[f.head] = nil
	f.head++
	f.bytes -= int64(it.size())
	if f.head > 1024 && f.head*2 > len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return it
}

func (f *fifo) clear() {
	clear(f.items)
	f.items, f.head, f.bytes = f.items[:0], 0, 0
}

// sentBatch is a batch handed to the stream and not yet acknowledged (the paper's
// popped map): its memory is accounted until an ack covers last.
type sentBatch struct {
	last   int64 // highest index in the batch (or the frame's index)
	bytes  int64
	sentAt time.Time
}

// queue is the target queue of Algorithms 1 and 2: normal + catch-up queues, a state and
// a term. It is not safe for concurrent use: its target's mutex guards it.
type queue struct {
	state   State
	term    uint64
	normal  fifo
	catchup fifo
	popped  []sentBatch
	// poppedBytes is the sum of popped[i].bytes.
	poppedBytes int64
}

func newQueue(term uint64, state State) *queue { return &queue{term: term, state: state} }

// push adds it to the normal queue (main) or the catch-up queue (recovery) if term is the
// queue's current term and the queue is not suspended (Algorithm 1, push).
func (q *queue) push(it *item, main bool, term uint64) bool {
	if term != q.term || q.state == StateS {
		return false
	}
	if main {
		q.normal.push(it)
	} else {
		q.catchup.push(it)
	}
	return true
}

// front returns the next item to send, or nil (⊥) when none is ready (Algorithm 1).
func (q *queue) front() *item {
	switch q.state {
	case StateRF, StateFC:
		return q.catchup.front()
	case StateN:
		return q.normal.front()
	}
	return nil
}

// pop removes the front item; FC becomes N when the catch-up queue drains (Algorithm 1).
func (q *queue) pop() *item {
	switch q.state {
	case StateRF, StateFC:
		it := q.catchup.pop()
		if q.state == StateFC && q.catchup.len() == 0 {
			q.state = StateN
		}
		return it
	case StateN:
		return q.normal.pop()
	}
	return nil
}

// fetchingCompleted is called by the recovery fetcher when it has pushed everything up to
// its end: RF becomes N (catch-up empty) or FC. A stale term is ignored. It reports whether
// the transition happened.
func (q *queue) fetchingCompleted(term uint64) bool {
	if term != q.term || q.state != StateRF {
		return false
	}
	if q.catchup.len() == 0 {
		q.state = StateN
	} else {
		q.state = StateFC
	}
	return true
}

// suspend clears both queues and moves to S; the term grows so that pushes in flight for
// the old term are dropped. The sent batches are released too: the stream is gone, no ack
// will come for them.
func (q *queue) suspend() {
	q.normal.clear()
	q.catchup.clear()
	q.popped, q.poppedBytes = nil, 0
	q.state = StateS
	q.term++
}

// restart drops both queues and starts a new recovery generation in RF under term, which
// must be newer than the queue's (a resync: pushes of the old generation are dropped). The
// sent batches stay accounted until acknowledged: they are on the wire.
func (q *queue) restart(term uint64) {
	q.normal.clear()
	q.catchup.clear()
	q.state = StateRF
	q.term = term
}

// refetch moves the queue to RF in the same term, keeping what it holds: a recovery
// fetcher is about to fill the catch-up queue with the range the normal queue lost
// (dropNormal). Not in the paper: the byte budget's way back from N or FC.
func (q *queue) refetch() { q.state = StateRF }

// dropNormal empties the normal queue (its target went over its byte budget).
func (q *queue) dropNormal() { q.normal.clear() }

// at returns the i-th item front would return after i pops (nil past the end): the
// catch-up queue in RF and FC — in FC followed by the normal queue, which pop switches to
// when the catch-up queue drains — and the normal queue in N.
func (q *queue) at(i int) *item {
	var f *fifo
	switch q.state {
	case StateRF:
		f = &q.catchup
	case StateFC:
		if n := q.catchup.len(); i >= n {
			i -= n
			f = &q.normal
		} else {
			f = &q.catchup
		}
	case StateN:
		f = &q.normal
	default:
		return nil
	}
	if i >= f.len() {
		return nil
	}
	return f.items[f.head+i]
}

// nextBatch builds the next batch (Algorithm 2): consecutive entries up to maxEntries and
// maxBytes (at least one entry), or a single frame. A batch that stops at its bound is cut
// after its last position entry when entries of a source transaction follow it (cutTxn):
// the transaction then starts the next batch instead of ending this one unfinished. The
// batch is recorded in popped, as sent at now, until ack releases it (or untrackLast). It
// returns nil when nothing is ready.
func (q *queue) nextBatch(maxEntries int, maxBytes int64, dst []*item, now time.Time) []*item {
	dst = dst[:0]
	// Count the batch without popping (at), then pop it: a cut never has to put items back.
	n, full := 0, false
	var bytes int64
	for {
		it := q.at(n)
		if it == nil {
			break
		}
		if it.frame != nil {
			if n == 0 {
				n, bytes = 1, int64(it.size())
			}
			break
		}
		if n > 0 && (n >= maxEntries || bytes+int64(it.size()) > maxBytes) {
			full = true
			break
		}
		n++
		bytes += int64(it.size())
	}
	if full || n >= maxEntries {
		if c := q.cutTxn(n); c < n {
			for i := c; i < n; i++ {
				bytes -= int64(q.at(i).size())
			}
			n = c
		}
	}
	for range n {
		dst = append(dst, q.pop())
	}
	if len(dst) == 0 {
		return dst
	}
	q.popped = append(q.popped, sentBatch{last: dst[len(dst)-1].index, bytes: bytes, sentAt: now})
	q.poppedBytes += bytes
	return dst
}

// cutTxn returns where a full batch of the first n items should end: after its last
// position entry when a source transaction's entry follows it in the batch, else n.
func (q *queue) cutTxn(n int) int {
	txn := false
	for i := n - 1; i >= 0; i-- {
		it := q.at(i)
		if it.isPosition() {
			if txn {
				return i + 1
			}
			return n
		}
		txn = txn || it.txn
	}
	return n
}

// untrackLast forgets the batch nextBatch just recorded: one that no ack will cover (a
// snapshot's rows and frames, acknowledged only as a whole by the ack of SnapshotEnd's
// index, and frames without an index).
func (q *queue) untrackLast() {
	last := q.popped[len(q.popped)-1]
	q.popped = q.popped[:len(q.popped)-1]
	q.poppedBytes -= last.bytes
}

// ack releases the sent batches whose last index is <= index (Algorithm 4, read side).
func (q *queue) ack(index int64) {
	n := 0
	for n < len(q.popped) && q.popped[n].last <= index {
		q.poppedBytes -= q.popped[n].bytes
		n++
	}
	if n > 0 {
		q.popped = append(q.popped[:0], q.popped[n:]...)
	}
}

// queuedBytes is the memory held by both queues.
func (q *queue) queuedBytes() int64 { return q.normal.bytes + q.catchup.bytes }
