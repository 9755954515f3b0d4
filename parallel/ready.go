package parallel

// readyQueue holds the records that may start now: at most one per key (its queue's head)
// under OrderKey/OrderPartition, any under OrderUnordered. It is a heap that serves the key
// with the longest backlog first (the critical-path rule: the heaviest key bounds the
// makespan), and among equal backlogs the lowest offset (which advances the watermark).
// Not safe for concurrent use: the engine holds its lock.
//
// Under OrderUnordered every backlog is equal, so the queue is a plain FIFO (fifo set).
type readyQueue[T any] struct {
	h    []*item[T]
	fifo bool
	head int // first live element in fifo mode
}

func backlog[T any](it *item[T]) int {
	if it.kq == nil {
		return 0
	}
	return len(it.kq.items)
}

func (q *readyQueue[T]) less(i, j int) bool {
	a, b := q.h[i], q.h[j]
	if la, lb := backlog(a), backlog(b); la != lb {
		return la > lb
	}
	return a.seq < b.seq
}

func (q *readyQueue[T]) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].idx = i
	q.h[j].idx = j
}

func (q *readyQueue[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *readyQueue[T]) down(i int) {
	n := len(q.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

func (q *readyQueue[T]) len() int { return len(q.h) - q.head }

func (q *readyQueue[T]) push(it *item[T]) {
	if q.fifo {
		if q.head > 0 && q.head == len(q.h) {
			q.h, q.head = q.h[:0], 0
		}
		q.h = append(q.h, it)
		return
	}
	it.idx = len(q.h)
	q.h = append(q.h, it)
	q.up(it.idx)
}

// fix restores the order after it's backlog grew.
func (q *readyQueue[T]) fix(it *item[T]) {
	if !q.fifo && it.idx >= 0 {
		q.up(it.idx)
	}
}

func (q *readyQueue[T]) remove(i int) *item[T] {
	if q.fifo {
		it := q.h[i]
		if i == q.head {
			q.h[i] = nil
			q.head++
		} else {
			q.h = append(q.h[:i], q.h[i+1:]...)
		}
		return it
	}
	it := q.h[i]
	last := len(q.h) - 1
	if i != last {
		q.swap(i, last)
	}
	q.h[last] = nil
	q.h = q.h[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	it.idx = -1
	return it
}

func (q *readyQueue[T]) pop() *item[T] { return q.remove(q.head) }

// find returns the index of the item with sequence seq, or -1.
func (q *readyQueue[T]) find(seq int64) int {
	for i := q.head; i < len(q.h); i++ {
		if q.h[i].seq == seq {
			return i
		}
	}
	return -1
}

func (q *readyQueue[T]) clear() {
	for _, it := range q.h[q.head:] {
		it.idx = -1
	}
	q.h, q.head = nil, 0
}
