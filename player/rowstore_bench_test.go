package player

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// BenchmarkSnapshotRows: the materialized copy holds PLAYER_BENCH_KEYS keys (default
// 1,000,000) of one view after 3 records per key (~70-byte values, like the cacheclient
// cold-start benchmark); one op is what a new target's snapshot does before SnapshotBegin:
// stream.snapshotRows (the rows of its views in index order, a walk of the view's arena).
// Reported: the heap per key of the whole copy (heap-B/key; heap-items-B/key the
// baseline's), and the wall time of a full collection
// with the copy alive (gc-ms) beside the same-run baseline gc-items-ms: the same rows held
// the way the copy held them before rowStore (an item per row in a map of keys, with an
// index-ordered slice of pointers), the copy not built yet.
func BenchmarkSnapshotRows(b *testing.B) {
	keys := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("PLAYER_BENCH_KEYS")); err == nil && n > 0 {
		keys = n
	}
	now := time.Now()
	message := func(i int) *sarama.ConsumerMessage {
		k := i % keys
		key := record.EncodeKey("events", strconv.Itoa(k))
		v := fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation %d"}`, k, k%50, k, i/keys)
		pm := recordsarama.ProducerMessage("t", key, v, record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: now, SourceLSN: "0/1"})
		m := &sarama.ConsumerMessage{Offset: int64(i), Key: key, Value: v, Timestamp: now}
		for _, h := range pm.Headers {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		return m
	}
	gcTime := func() time.Duration {
		best := time.Duration(0)
		for range 3 {
			t0 := time.Now()
			runtime.GC()
			if d := time.Since(t0); best == 0 || d < best {
				best = d
			}
		}
		return best
	}

	// Baseline: the previous layout of the same rows, alone in the heap.
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	old := map[string]*item{}
	var order []*item
	for i := range 3 * keys {
		it := itemOf(message(i))
		old[it.key] = it
		order = append(order, it)
	}
	order = slices.DeleteFunc(order, func(it *item) bool { return old[it.key] != it })
	order = slices.Clip(order)
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	heapItems := ms1.HeapAlloc - ms0.HeapAlloc
	gcItems := gcTime()
	runtime.KeepAlive(old)
	runtime.KeepAlive(order)
	old, order = nil, nil

	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}}, HistoryBytes: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	woken := map[*target]struct{}{}
	for i := range 3 * keys {
		s.apply(message(i), false, woken)
	}
	s.mu.Lock()
	s.hist = history{max: 1, evicted: s.hist.evicted} // the history is not the copy: drop it
	s.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	gcStore := gcTime()
	views := viewSet{"events"}
	b.ResetTimer()
	for range b.N {
		s.mu.Lock()
		rows := s.snapshotRows(views, 0, nil)
		s.mu.Unlock()
		if rows.len() != keys {
			b.Fatalf("%d rows, want %d", rows.len(), keys)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/float64(keys), "heap-B/key")
	b.ReportMetric(float64(heapItems)/float64(keys), "heap-items-B/key")
	b.ReportMetric(float64(gcStore.Microseconds())/1000, "gc-ms")
	b.ReportMetric(float64(gcItems.Microseconds())/1000, "gc-items-ms")
	runtime.KeepAlive(s)
}
