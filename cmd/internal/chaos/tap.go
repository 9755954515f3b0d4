package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// tap follows the stream from its first record through the whole run, on the broker's
// direct listener (no fault touches it), and keeps every record with its value: the
// stream's history as the distributors wrote it, before compaction removes superseded
// records. It explains violations: a key's history, and the stream's own state at a
// position (did the stream hold it, or only the client?).
type tap struct {
	mu    sync.Mutex
	recs  []tapRecord
	byKey map[string][]int // record key → indexes in recs
	next  int64
	done  chan struct{}
}

type tapRecord struct {
	Index int64
	Key   string
	Value []byte // nil: a tombstone
	Kind  string
	Epoch string
	LSN   string
	Txn   bool
	At    time.Time // when the tap read it
}

func (r tapRecord) String() string {
	v := "tombstone"
	if r.Value != nil {
		v = string(r.Value)
	}
	s := fmt.Sprintf("@%d %s epoch %s", r.Index, r.Kind, r.Epoch)
	if r.LSN != "" {
		s += " lsn " + r.LSN
	}
	if r.Txn {
		s += " txn"
	}
	return s + " " + trunc(v, 200)
}

func startTap(ctx context.Context, brokers []string) *tap {
	t := &tap{byKey: map[string][]int{}, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for ctx.Err() == nil {
			t.follow(ctx, brokers)
			sleep(ctx, time.Second)
		}
	}()
	return t
}

// follow reads from the next offset until an error or ctx ends.
func (t *tap) follow(ctx context.Context, brokers []string) {
	cfg := kafkaconn.NewConfig("statecast-chaos-tap")
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		return
	}
	defer c.Close()
	t.mu.Lock()
	from := t.next
	t.mu.Unlock()
	pc, err := c.ConsumePartition(streamName, 0, from)
	if errors.Is(err, sarama.ErrOffsetOutOfRange) {
		pc, err = c.ConsumePartition(streamName, 0, sarama.OffsetOldest)
	}
	if err != nil {
		return
	}
	defer pc.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-pc.Errors():
			if !ok {
				return
			}
			return
		case m, ok := <-pc.Messages():
			if !ok {
				return
			}
			t.add(m)
		}
	}
}

func (t *tap) add(m *sarama.ConsumerMessage) {
	r := tapRecord{Index: m.Offset, Key: string(m.Key), Value: m.Value, At: time.Now()}
	for _, h := range m.Headers {
		switch string(h.Key) {
		case record.HeaderKind:
			r.Kind = string(h.Value)
		case record.HeaderEpoch:
			r.Epoch = string(h.Value)
		case record.HeaderSourceLSN:
			r.LSN = string(h.Value)
		case record.HeaderTxn:
			r.Txn = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.Offset < t.next {
		return // read again after a reconnect
	}
	t.next = m.Offset + 1
	t.byKey[r.Key] = append(t.byKey[r.Key], len(t.recs))
	t.recs = append(t.recs, r)
}

// history returns the last n records of a view's key.
func (t *tap) history(view, key string, n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ix := t.byKey[string(record.KeyPrefix(view))+key]
	var out []string
	for _, i := range ix[max(0, len(ix)-n):] {
		out = append(out, t.recs[i].String())
	}
	return out
}

// explainSums replays the accounts view of the stream up to index pos and says whether
// the stream itself held the sums a client showed there; if it did, it names the first
// transaction boundary from which the stream's sums stayed wrong, and the account records
// before it.
func (t *tap) explainSums(pos int64, writers int, want []int64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := string(record.KeyPrefix("accounts"))
	bal := map[int]int64{}
	sums := make([]int64, writers)
	firstBad := -1
	for i, r := range t.recs {
		if r.Index > pos {
			break
		}
		if key, ok := strings.CutPrefix(r.Key, prefix); ok && r.Kind == string(record.KindRow) {
			if id, err := strconv.Atoi(key); err == nil {
				sums[id%writers] -= bal[id]
				bal[id] = 0
				if r.Value != nil {
					bal[id] = intColumn(r.Value, "balance")
					sums[id%writers] += bal[id]
				}
			}
		}
		if r.Kind == string(record.KindPosition) || !r.Txn {
			// No transaction is open after this record: a state a client may publish.
			switch {
			case slices.Equal(sums, want):
				firstBad = -1
			case firstBad < 0:
				firstBad = i
			}
		}
	}
	if slices.Equal(sums, want) {
		return fmt.Sprintf("the stream itself at index %d holds the right sums %v: the client's Cut is wrong", pos, sums)
	}
	s := fmt.Sprintf("the stream itself at index %d holds sums %v: the client shows what the distributors published", pos, sums)
	if firstBad >= 0 {
		s += fmt.Sprintf("; they are wrong from index %d on; the account and position records up to it:", t.recs[firstBad].Index)
		var lines []string
		for i := firstBad; i >= 0 && len(lines) < 14; i-- {
			if r := t.recs[i]; strings.HasPrefix(r.Key, prefix) || r.Kind == string(record.KindPosition) {
				lines = append(lines, "\n      "+r.Key+" "+r.String())
			}
		}
		slices.Reverse(lines)
		s += strings.Join(lines, "")
	}
	return s
}

// end is the index after the last record the tap read.
func (t *tap) end() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

// stale lists the row records whose version is below that of an earlier record of the
// same key: an old row that landed after a newer one, so that the stream went back in
// time for that key (a second writer of the stream, or a reordering).
// at is when the tap read the first and the last of them.
func (t *tap) stale(limit int) (out []string, n int, at [2]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	type seen struct {
		v     int64
		index int64
	}
	top := map[string]seen{}
	for _, r := range t.recs {
		if r.Kind != string(record.KindRow) || r.Value == nil {
			continue
		}
		v := rowVersion(r.Value)
		s := top[r.Key]
		if v < s.v {
			n++
			if n == 1 {
				at[0] = r.At
			}
			at[1] = r.At
			if len(out) < limit {
				out = append(out, fmt.Sprintf("%s %s (read %s) after @%d with version %d",
					r.Key, r, r.At.Format("15:04:05.000"), s.index, s.v))
			}
			continue
		}
		top[r.Key] = seen{v, r.Index}
	}
	return out, n, at
}
