package player

import (
	"cmp"
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
// stream.snapshotRows (the rows of its views in index order, a walk of stream.order). The
// same-run baseline "sort-s" is the previous way: collect the rows from the per-view maps
// and sort them by index. Also reported: the heap per key of the whole copy (maps, items,
// order) and the order's own bytes per key (the cost of not sorting).
func BenchmarkSnapshotRows(b *testing.B) {
	keys := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("PLAYER_BENCH_KEYS")); err == nil && n > 0 {
		keys = n
	}
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s"}}, HistoryBytes: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s := p.streams["s"]
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	woken := map[*target]struct{}{}
	now := time.Now()
	for i := range 3 * keys {
		k := i % keys
		key := record.EncodeKey("events", strconv.Itoa(k))
		v := fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation %d"}`, k, k%50, k, i/keys)
		pm := recordsarama.ProducerMessage("t", key, v, record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: now, SourceLSN: "0/1"})
		m := &sarama.ConsumerMessage{Offset: int64(i), Key: key, Value: v, Timestamp: now}
		for _, h := range pm.Headers {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		s.apply(m, false, woken)
	}
	s.mu.Lock()
	s.hist = history{max: 1, evicted: s.hist.evicted} // the history is not the copy: drop it
	s.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	views := map[string]bool{"events": true}

	// Baseline: the previous snapshot start (map walk under the lock, then a sort).
	var sortTime time.Duration
	for range 3 {
		t0 := time.Now()
		s.mu.Lock()
		var rows []*item
		for v, vm := range s.rows {
			if !views[v] {
				continue
			}
			for _, it := range vm {
				rows = append(rows, it)
			}
		}
		s.mu.Unlock()
		slices.SortFunc(rows, func(a, b *item) int { return cmp.Compare(a.index, b.index) })
		if d := time.Since(t0); sortTime == 0 || d < sortTime {
			sortTime = d
		}
		if len(rows) != keys {
			b.Fatalf("%d rows, want %d", len(rows), keys)
		}
	}
	b.ResetTimer()
	for range b.N {
		s.mu.Lock()
		rows := s.snapshotRows(views, 0, nil)
		s.mu.Unlock()
		if len(rows) != keys {
			b.Fatalf("%d rows, want %d", len(rows), keys)
		}
	}
	b.StopTimer()
	s.mu.Lock()
	orderBytes := 0.0
	for _, o := range s.order {
		orderBytes += float64(cap(o.slots)) * 16
	}
	s.mu.Unlock()
	b.ReportMetric(sortTime.Seconds(), "sort-s")
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/float64(keys), "heap-B/key")
	b.ReportMetric(orderBytes/float64(keys), "order-B/key")
	runtime.KeepAlive(s)
}
