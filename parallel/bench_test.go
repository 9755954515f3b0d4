package parallel

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	benchMessages = flag.Int("pc.messages", 10000, "messages per row of the seed table")
	benchSeed     = flag.Uint64("pc.seed", 1, "random seed for processing times and keys")
	benchWork     = flag.String("pc.work", defaultWork, "simulated work function of the seed table (see sleepers)")
)

// seedRow is one row of the table of published durations in Confluent's Parallel Consumer
// documentation (docs/BENCHMARKS.md, The Parallel Consumer table, gives its conditions).
type seedRow struct {
	ordering  Ordering
	keys      int // 0: not relevant
	published string
}

var seedTable = []seedRow{
	{OrderPartition, 0, "22.221s"},
	{OrderKey, 1, "26.743s"},
	{OrderKey, 2, "13.576s"},
	{OrderKey, 5, "5.916s"},
	{OrderKey, 10, "3.310s"},
	{OrderKey, 20, "2.242s"},
	{OrderKey, 50, "2.204s"},
	{OrderKey, 100, "2.178s"},
	{OrderKey, 1000, "2.056s"},
	{OrderKey, 10000, "2.128s"},
	{OrderUnordered, 0, "2.829s"},
}

// workload returns n records with random keys (keys > 0) and random 0–5 ms processing times
// drawn from seed; the same seed gives the same workload to every row and to the bound.
func workload(n, keys int, seed uint64) ([]Record[time.Duration], time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 5))
	recs := make([]Record[time.Duration], n)
	for i := range recs {
		d := time.Duration(rng.Int64N(int64(5*time.Millisecond) + 1))
		k := 0
		if keys > 0 {
			k = rng.IntN(keys)
		}
		recs[i] = Record[time.Duration]{Key: []byte(strconv.Itoa(k)), Offset: int64(i), Value: d}
	}
	var total time.Duration
	for _, r := range recs {
		total += r.Value
	}
	return recs, total
}

// lowerBound is the larger of total work / workers and the heaviest serial chain's work.
func lowerBound(recs []Record[time.Duration], o Ordering, workers int) time.Duration {
	var total, heaviest time.Duration
	perKey := map[string]time.Duration{}
	for _, r := range recs {
		total += r.Value
		switch o {
		case OrderKey:
			perKey[string(r.Key)] += r.Value
			heaviest = max(heaviest, perKey[string(r.Key)])
		case OrderPartition:
			heaviest = total
		case OrderUnordered:
			heaviest = max(heaviest, r.Value)
		}
	}
	return max(total/time.Duration(workers), heaviest)
}

// workRatio is total realised work / total nominal work: 1.000 when the simulated work took
// exactly its nominal time.
func workRatio(nominal, realised []Record[time.Duration]) float64 {
	var n, r time.Duration
	for i := range nominal {
		n += nominal[i].Value
		r += realised[i].Value
	}
	return float64(r) / float64(n)
}

// runWorkload runs recs, each handler calling sleep(nominal), and returns the elapsed time and
// the records with the durations their sleeps actually took (the realised work).
func runWorkload(b *testing.B, recs []Record[time.Duration], o Ordering, workers int, sleep func(time.Duration)) (time.Duration, []Record[time.Duration]) {
	actual := make([]Record[time.Duration], len(recs))
	copy(actual, recs)
	e, err := New(Config[time.Duration]{
		Ordering:           o,
		MaxConcurrency:     workers,
		MaxBufferedRecords: len(recs),
		Handler: func(_ context.Context, r Record[time.Duration]) error {
			t0 := time.Now()
			sleep(r.Value)
			actual[r.Offset].Value = time.Since(t0)
			return nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, r := range recs {
		if err := e.Submit(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		b.Fatal(err)
	}
	return time.Since(start), actual
}

// runChannelBaseline runs recs unordered on a channel and workers goroutines, with the same
// work function as the engine.
func runChannelBaseline(recs []Record[time.Duration], workers int, sleep func(time.Duration)) (time.Duration, []Record[time.Duration]) {
	actual := make([]Record[time.Duration], len(recs))
	copy(actual, recs)
	ch := make(chan Record[time.Duration], len(recs))
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range ch {
				t0 := time.Now()
				sleep(r.Value)
				actual[r.Offset].Value = time.Since(t0)
			}
		})
	}
	for _, r := range recs {
		ch <- r
	}
	close(ch)
	wg.Wait()
	return time.Since(start), actual
}

// BenchmarkSeedTable reproduces the Parallel Consumer table (docs/BENCHMARKS.md): 10,000
// messages, random 0–5 ms processing, one partition. The processing is simulated by the
// -pc.work function (default timerthread+cal: a precise timer thread, calibrated so the
// work takes its nominal time on average, unlike time.Sleep on Linux; see
// BenchmarkSleepAccuracy); the engine and the channel baseline call the same one. Each row
// prints the published Parallel Consumer duration (measured by Confluent at maxConcurrency
// 100 with 16 threads, on their hardware) and the lower bound for the same workload.
func BenchmarkSeedTable(b *testing.B) {
	newSleep, ok := sleepers[*benchWork]
	if !ok {
		b.Fatalf("unknown -pc.work %q", *benchWork)
	}
	for _, workers := range []int{16, 100} {
		b.Run(fmt.Sprintf("concurrency=%d", workers), func(b *testing.B) {
			sleep, stop := newSleep()
			defer stop()
			var worst, worstRealised float64
			for b.Loop() {
				worst, worstRealised = 0, 0
				fmt.Fprintf(os.Stdout, "\nseed table: %d messages, random 0-5ms (seed %d), concurrency %d, work %s\n", *benchMessages, *benchSeed, workers, *benchWork)
				fmt.Fprintf(os.Stdout, "%-10s %6s %12s %12s %12s %7s %14s %7s %6s\n", "ordering", "keys", "published PC", "lower bound", "measured", "ratio", "realised bound", "ratio", "work")
				for _, row := range seedTable {
					keys := row.keys
					if row.ordering != OrderKey {
						keys = 20
					}
					recs, _ := workload(*benchMessages, keys, *benchSeed)
					lb := lowerBound(recs, row.ordering, workers)
					got, actual := runWorkload(b, recs, row.ordering, workers, sleep)
					ratio := float64(got) / float64(lb)
					rb := lowerBound(actual, row.ordering, workers)
					rratio := float64(got) / float64(rb)
					worst = max(worst, ratio)
					worstRealised = max(worstRealised, rratio)
					k := strconv.Itoa(row.keys)
					if row.keys == 0 {
						k = "-"
					}
					fmt.Fprintf(os.Stdout, "%-10s %6s %12s %12s %12s %7.3f %14s %7.3f %6.3f\n", row.ordering, k, row.published,
						lb.Round(time.Millisecond), got.Round(time.Millisecond), ratio, rb.Round(time.Millisecond), rratio, workRatio(recs, actual))
				}
				// Same-run baseline: the unordered workload on a plain channel and goroutines.
				recs, _ := workload(*benchMessages, 20, *benchSeed)
				lb := lowerBound(recs, OrderUnordered, workers)
				got, actual := runChannelBaseline(recs, workers, sleep)
				rb := lowerBound(actual, OrderUnordered, workers)
				fmt.Fprintf(os.Stdout, "%-10s %6s %12s %12s %12s %7.3f %14s %7.3f %6.3f\n", "baseline", "-", "chan+gor.",
					lb.Round(time.Millisecond), got.Round(time.Millisecond), float64(got)/float64(lb), rb.Round(time.Millisecond), float64(got)/float64(rb), workRatio(recs, actual))
			}
			b.ReportMetric(worst, "worst-ratio")
			b.ReportMetric(worstRealised, "worst-realised-ratio")
		})
	}
}

// BenchmarkOverhead measures the engine's cost per record with a no-op handler, beside a
// plain channel + worker goroutines baseline (no ordering, no tracking) in the same run.
func BenchmarkOverhead(b *testing.B) {
	const workers = 16
	b.Run("baseline=channel+goroutines", func(b *testing.B) {
		ch := make(chan Record[int], 1024)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for r := range ch {
					_ = r
				}
			})
		}
		i := int64(0)
		for b.Loop() {
			ch <- Record[int]{Key: []byte("k"), Offset: i}
			i++
		}
		close(ch)
		wg.Wait()
	})
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(strconv.Itoa(i))
	}
	for _, o := range []Ordering{OrderUnordered, OrderKey, OrderPartition} {
		b.Run("engine="+o.String(), func(b *testing.B) {
			e, err := New(Config[int]{
				Ordering:           o,
				MaxConcurrency:     workers,
				MaxBufferedRecords: 1024,
				Handler:            func(context.Context, Record[int]) error { return nil },
			})
			if err != nil {
				b.Fatal(err)
			}
			i := int64(0)
			for b.Loop() {
				if err := e.Submit(context.Background(), Record[int]{Key: keys[i%1000], Offset: i}); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if err := e.Shutdown(context.Background(), Drain); err != nil {
				b.Fatal(err)
			}
		})
	}
}
