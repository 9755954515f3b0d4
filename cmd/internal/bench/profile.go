package bench

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// profileFiles names the profiles to write over a whole run (empty = not taken).
type profileFiles struct{ CPU, Mutex, Block, Mem, Trace string }

// profileFlags registers -cpuprofile, -mutexprofile, -blockprofile, -memprofile and -trace.
func profileFlags(fs *flag.FlagSet) *profileFiles {
	p := &profileFiles{}
	fs.StringVar(&p.CPU, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&p.Mutex, "mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	fs.StringVar(&p.Block, "blockprofile", "", "write a blocking profile of the whole run to this file")
	fs.StringVar(&p.Mem, "memprofile", "", "write an allocation profile (alloc_space) at the end of the run to this file")
	fs.StringVar(&p.Trace, "trace", "", "write an execution trace (go tool trace) of the whole run to this file")
	return p
}

// Start starts the requested profiles; the returned function stops them and writes them.
func (pf profileFiles) Start() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if pf.CPU != "" {
		f, err := os.Create(pf.CPU)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if pf.Trace != "" {
		f, err := os.Create(pf.Trace)
		if err != nil {
			stop()
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return nil, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	lookup := func(name, file string) {
		stops = append(stops, func() {
			if f, err := os.Create(file); err == nil {
				_ = pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		})
	}
	if pf.Mutex != "" {
		runtime.SetMutexProfileFraction(5)
		lookup("mutex", pf.Mutex)
	}
	if pf.Block != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		lookup("block", pf.Block)
	}
	if pf.Mem != "" {
		lookup("allocs", pf.Mem)
	}
	return stop, nil
}

// Layout says where a benchmark of the player runs, for its header line: how many cores
// Go uses, all of them shared by the player, the baselines and every receiver.
func Layout() string {
	return fmt.Sprintf("GOMAXPROCS=%d, receivers in this process", runtime.GOMAXPROCS(0))
}
