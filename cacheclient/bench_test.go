package cacheclient

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// Benchmarks compare the view's Get with sync.Map Load and ristretto Get measured in the
// same run, each while a writer goroutine applies ~50,000 updates/s to the same structure.
// Run: go test -run '^$' -bench . -benchmem ./cacheclient/

const (
	benchKeys      = 200_000
	writerRate     = 50_000 // updates per second
	writerBatch    = 500    // updates per batch (a batch every 10ms)
	benchCompetIDs = 20_000 // index values: ~10 objects each
)

type benchObj struct {
	ID          int64
	Competition string
	Name        string
	Price       float64
}

var benchKeyList = func() []string {
	ks := make([]string, benchKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("%d", 1_000_000+i)
	}
	return ks
}()

func benchValue(i, gen int) []byte {
	return fmt.Appendf(nil, `{"id":%d,"competition":"c%d","name":"event %d","price":%d.5}`, i, i%benchCompetIDs, i, gen)
}

func newBenchView(tb testing.TB) *View[benchObj] {
	c := newTestClient(tb)
	v, err := Register(c, "bench", func(_ string, b []byte) (benchObj, error) {
		// A light hand-written decoder (what a service keeps is small): the competition
		// field, the value length standing in for the rest.
		var o benchObj
		s := string(b)
		i := strings.Index(s, `"competition":"`) + len(`"competition":"`)
		j := strings.IndexByte(s[i:], '"')
		o.ID = int64(len(b))
		o.Competition = s[i : i+j]
		return o, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := v.AddIndex("competition", func(o benchObj) []string { return []string{o.Competition} }); err != nil {
		tb.Fatal(err)
	}
	v.begin()
	for i, k := range benchKeyList {
		v.applyRow(row{key: k, fullKey: []byte("bench|" + k), value: benchValue(i, 0), index: int64(i)})
	}
	v.commit(int64(len(benchKeyList)))
	return v
}

// rateWriter calls apply(batch) writerRate/writerBatch times per second until stopped and
// returns the achieved update rate.
func rateWriter(apply func(gen int, keys []int)) (stop func() float64) {
	done := make(chan struct{})
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		t := time.NewTicker(time.Second * writerBatch / writerRate)
		defer t.Stop()
		var keys []int
		for gen := 1; ; gen++ {
			select {
			case <-done:
				return
			case <-t.C:
			}
			// Catch up with the target rate when the goroutine was not scheduled in time.
			due := int(time.Since(start).Seconds()*writerRate) - int(n.Load())
			due = min(due, 10*writerBatch)
			if due <= 0 {
				continue
			}
			keys = keys[:0]
			for range due {
				keys = append(keys, rng.IntN(benchKeys))
			}
			apply(gen, keys)
			n.Add(int64(due))
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
}

func BenchmarkGetConcurrentWriter(b *testing.B) {
	b.Run("cacheclient.View.Get", func(b *testing.B) {
		v := newBenchView(b)
		idx := int64(benchKeys)
		stop := rateWriter(func(gen int, keys []int) {
			for _, i := range keys {
				idx++
				k := benchKeyList[i]
				v.applyRow(row{key: k, fullKey: []byte("bench|" + k), value: benchValue(i, gen), index: idx})
			}
			v.commit(idx)
		})
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
			var sink int64
			for pb.Next() {
				o, _ := v.Get(benchKeyList[rng.IntN(benchKeys)])
				sink += o.ID
			}
			_ = sink
		})
		b.StopTimer()
		b.ReportMetric(stop(), "writes/s")
	})
	b.Run("sync.Map.Load", func(b *testing.B) {
		var m sync.Map
		for i, k := range benchKeyList {
			m.Store(k, benchObj{ID: int64(i), Competition: "c"})
		}
		stop := rateWriter(func(gen int, keys []int) {
			for _, i := range keys {
				m.Store(benchKeyList[i], benchObj{ID: int64(gen), Competition: "c"})
			}
		})
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
			var sink int64
			for pb.Next() {
				o, _ := m.Load(benchKeyList[rng.IntN(benchKeys)])
				sink += o.(benchObj).ID
			}
			_ = sink
		})
		b.StopTimer()
		b.ReportMetric(stop(), "writes/s")
	})
	b.Run("ristretto.Get", func(b *testing.B) {
		c, err := ristretto.NewCache(&ristretto.Config[string, benchObj]{NumCounters: 10 * benchKeys, MaxCost: 1 << 40, BufferItems: 64})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for i, k := range benchKeyList {
			c.Set(k, benchObj{ID: int64(i)}, 1)
		}
		c.Wait()
		stop := rateWriter(func(gen int, keys []int) {
			for _, i := range keys {
				c.Set(benchKeyList[i], benchObj{ID: int64(gen)}, 1)
			}
		})
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
			var sink int64
			for pb.Next() {
				o, _ := c.Get(benchKeyList[rng.IntN(benchKeys)])
				sink += o.ID
			}
			_ = sink
		})
		b.StopTimer()
		b.ReportMetric(stop(), "writes/s")
	})
}

// BenchmarkByIndex: ByIndex over ~10 objects per value, one reader, no writer: the cost of
// one call alone (the collection of the objects in key order), which the concurrent
// benchmark below measures among a writer's and the other readers' noise.
func BenchmarkByIndex(b *testing.B) {
	v := newBenchView(b)
	values := v.IndexValues("competition")
	n := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n += len(v.ByIndex("competition", values[i%len(values)]))
	}
	b.ReportMetric(float64(n)/float64(b.N), "objects/op")
}

// BenchmarkByIndexConcurrentWriter: ByIndex over ~10 objects per value with a writer at
// ~50,000 updates/s, beside the classic design (client-go's thread_safe_store): maps for
// the objects and the index behind one RWMutex, the writer holding it per batch.
func BenchmarkByIndexConcurrentWriter(b *testing.B) {
	b.Run("cacheclient", func(b *testing.B) {
		v := newBenchView(b)
		idx := int64(benchKeys)
		stop := rateWriter(func(gen int, keys []int) {
			for _, i := range keys {
				idx++
				k := benchKeyList[i]
				v.applyRow(row{key: k, fullKey: []byte("bench|" + k), value: benchValue(i, gen), index: idx})
			}
			v.commit(idx)
		})
		values := v.IndexValues("competition")
		var results atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
			n := 0
			for pb.Next() {
				n += len(v.ByIndex("competition", values[rng.IntN(len(values))]))
			}
			results.Add(int64(n))
		})
		b.StopTimer()
		b.ReportMetric(float64(results.Load())/float64(b.N), "objects/op")
		b.ReportMetric(stop(), "writes/s")
	})
	b.Run("rwmutex-maps", func(b *testing.B) {
		var mu sync.RWMutex
		objs := map[string]benchObj{}
		index := map[string]map[string]struct{}{}
		put := func(k string, o benchObj) {
			if old, ok := objs[k]; ok && old.Competition != o.Competition {
				delete(index[old.Competition], k)
				if len(index[old.Competition]) == 0 {
					delete(index, old.Competition)
				}
			}
			objs[k] = o
			if index[o.Competition] == nil {
				index[o.Competition] = map[string]struct{}{}
			}
			index[o.Competition][k] = struct{}{}
		}
		for i, k := range benchKeyList {
			put(k, benchObj{ID: int64(i), Competition: fmt.Sprintf("c%d", i%benchCompetIDs)})
		}
		stop := rateWriter(func(gen int, keys []int) {
			mu.Lock()
			for _, i := range keys {
				put(benchKeyList[i], benchObj{ID: int64(gen), Competition: fmt.Sprintf("c%d", i%benchCompetIDs)})
			}
			mu.Unlock()
		})
		var values []string
		for v := range index {
			values = append(values, v)
		}
		var results atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
			n := 0
			for pb.Next() {
				mu.RLock()
				set := index[values[rng.IntN(len(values))]]
				out := make([]benchObj, 0, len(set))
				for k := range set {
					out = append(out, objs[k])
				}
				mu.RUnlock()
				n += len(out)
			}
			results.Add(int64(n))
		})
		b.StopTimer()
		b.ReportMetric(float64(results.Load())/float64(b.N), "objects/op")
		b.ReportMetric(stop(), "writes/s")
	})
}

// BenchmarkMemoryPerEntry measures the live heap added per entry by 1,000,000 entries whose
// key strings already exist (so key bytes are not counted), minus the object's own size,
// beside a plain map[string]T and a sync.Map holding the same keys and objects.
func BenchmarkMemoryPerEntry(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%d", 10_000_000+i)
	}
	type obj struct {
		ID    int64
		Price float64
	}
	objSize := 16
	measure := func(b *testing.B, build func() any) {
		for range b.N {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			keep := build()
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(keep)
			total := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			b.ReportMetric(total/n, "heapB/entry")
			b.ReportMetric(total/n-float64(objSize), "overheadB/entry")
		}
	}
	b.Run("cacheclient.View", func(b *testing.B) {
		measure(b, func() any {
			v, _ := Register(newTestClient(b), "m", func(_ string, _ []byte) (obj, error) { return obj{ID: 1}, nil })
			v.begin()
			val := []byte("{}")
			for _, k := range keys {
				v.applyRow(row{key: k, fullKey: nil, value: val})
			}
			v.commit(1)
			return v
		})
	})
	b.Run("map[string]T", func(b *testing.B) {
		measure(b, func() any {
			m := make(map[string]obj)
			for _, k := range keys {
				m[k] = obj{ID: 1}
			}
			return m
		})
	})
	b.Run("sync.Map", func(b *testing.B) {
		measure(b, func() any {
			var m sync.Map
			for _, k := range keys {
				m.Store(k, obj{ID: 1})
			}
			return &m
		})
	})
}

// BenchmarkGetInterleaved measures the three structures in alternating rounds (each with
// its own writer at ~50,000 updates/s, running only during its round), so that background
// load hits all three alike; it reports the median ns per Get of each and
// the ratio of cacheclient to sync.Map. Run with -benchtime=1x.
func BenchmarkGetInterleaved(b *testing.B) {
	const rounds, opsPerRound = 9, 2_000_000
	v := newBenchView(b)
	var sm sync.Map
	for i, k := range benchKeyList {
		sm.Store(k, benchObj{ID: int64(i)})
	}
	rc, err := ristretto.NewCache(&ristretto.Config[string, benchObj]{NumCounters: 10 * benchKeys, MaxCost: 1 << 40, BufferItems: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	for i, k := range benchKeyList {
		rc.Set(k, benchObj{ID: int64(i)}, 1)
	}
	rc.Wait()
	idx := int64(benchKeys)
	type impl struct {
		name  string
		get   func(string) int64
		write func(gen int, keys []int)
		ns    []float64
		wps   []float64
	}
	impls := []*impl{
		{name: "cacheclient", get: func(k string) int64 { o, _ := v.Get(k); return o.ID },
			write: func(gen int, keys []int) {
				for _, i := range keys {
					idx++
					k := benchKeyList[i]
					v.applyRow(row{key: k, fullKey: []byte("bench|" + k), value: benchValue(i, gen), index: idx})
				}
				v.commit(idx)
			}},
		{name: "syncmap", get: func(k string) int64 { o, _ := sm.Load(k); return o.(benchObj).ID },
			write: func(gen int, keys []int) {
				for _, i := range keys {
					sm.Store(benchKeyList[i], benchObj{ID: int64(gen)})
				}
			}},
		{name: "ristretto", get: func(k string) int64 { o, _ := rc.Get(k); return o.ID },
			write: func(gen int, keys []int) {
				for _, i := range keys {
					rc.Set(benchKeyList[i], benchObj{ID: int64(gen)}, 1)
				}
			}},
	}
	procs := runtime.GOMAXPROCS(0)
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for _, im := range impls {
			stop := rateWriter(im.write)
			start := time.Now()
			var wg sync.WaitGroup
			for p := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(r), uint64(p)))
					var sink int64
					for range opsPerRound / procs {
						sink += im.get(benchKeyList[rng.IntN(benchKeys)])
					}
					_ = sink
				}()
			}
			wg.Wait()
			im.ns = append(im.ns, float64(time.Since(start).Nanoseconds())/opsPerRound)
			im.wps = append(im.wps, stop())
		}
	}
	b.StopTimer()
	med := func(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }
	for _, im := range impls {
		b.ReportMetric(med(im.ns), im.name+"-ns/get")
	}
	b.ReportMetric(med(impls[0].ns)/med(impls[1].ns), "cacheclient/syncmap")
	b.ReportMetric(med(impls[0].wps), "cacheclient-writes/s")
}
