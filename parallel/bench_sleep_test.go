package parallel

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var benchCalls = flag.Int("pc.calls", 4000, "sleeps per candidate and concurrency in BenchmarkSleepAccuracy")

// osThreads returns the process's OS thread count (Linux /proc; 0 elsewhere).
func osThreads() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// BenchmarkSleepAccuracy measures how long each candidate work function really takes for a
// random 0–5 ms nominal duration (the seed table's distribution), with 1 (the serial rows),
// 16 and 100 goroutines sleeping at once: the distribution of actual − nominal, the OS threads the process ends
// with, and the wall time of the whole batch against total nominal work / concurrency.
func BenchmarkSleepAccuracy(b *testing.B) {
	names := make([]string, 0, len(sleepers))
	for n := range sleepers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, conc := range []int{1, 16, 100} {
		for _, name := range names {
			b.Run(fmt.Sprintf("conc=%d/%s", conc, name), func(b *testing.B) {
				sleep, stop := sleepers[name]()
				defer stop()
				for b.Loop() {
					rng := rand.New(rand.NewPCG(*benchSeed, 5))
					n := *benchCalls
					if conc == 1 {
						n = max(n/10, 1) // serial: 10× fewer calls keep the run short
					}
					nominal := make([]time.Duration, n)
					var total time.Duration
					for i := range nominal {
						nominal[i] = time.Duration(rng.Int64N(int64(5*time.Millisecond) + 1))
						total += nominal[i]
					}
					over := make([]time.Duration, len(nominal))
					threads0 := osThreads()
					var next atomic.Int64
					var wg sync.WaitGroup
					start := time.Now()
					for range conc {
						wg.Go(func() {
							for {
								i := int(next.Add(1) - 1)
								if i >= len(nominal) {
									return
								}
								t0 := time.Now()
								sleep(nominal[i])
								over[i] = time.Since(t0) - nominal[i]
							}
						})
					}
					wg.Wait()
					wall := time.Since(start)
					threads := osThreads()
					slices.Sort(over)
					var sum time.Duration
					for _, o := range over {
						sum += o
					}
					q := func(p float64) time.Duration { return over[int(p*float64(len(over)-1))] }
					mean := sum / time.Duration(len(over))
					fmt.Fprintf(os.Stdout, "%-3d %-16s calls %d  actual-nominal µs: mean %6.1f  p50 %6.1f  p90 %6.1f  p99 %6.1f  max %7.1f  min %6.1f | wall/bound %.3f | GOMAXPROCS %d threads %d->%d\n",
						conc, name, len(over), us(mean), us(q(.5)), us(q(.9)), us(q(.99)), us(over[len(over)-1]), us(over[0]),
						float64(wall)/float64(total/time.Duration(conc)), runtime.GOMAXPROCS(0), threads0, threads)
					b.ReportMetric(us(mean), "mean-over-µs")
					b.ReportMetric(us(q(.99)), "p99-over-µs")
				}
			})
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
