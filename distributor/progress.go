package distributor

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// progressBatch is how many rows a reader counts locally before it adds them to the
// shared count: the count is read by the progress log and the metric, not per row.
const progressBatch = 1024

// progress reports one long read while it runs: the rows counted so far go to the
// statecast_distributor_read_total counter as they are read, and a log line says rows,
// rows/s, view and phase every Config.ProgressInterval. A read that ends within the first
// interval logs nothing. The reader calls row for each row and end once; a nil *progress
// does nothing (a poll).
type progress struct {
	stream, view, phase string
	counter             prometheus.Counter
	started             time.Time

	local    int64        // owned by the reader
	rows     atomic.Int64 // counted so far
	estimate atomic.Int64 // rows expected (the planner's estimate, the last epoch's rows, the topic's offsets); 0: unknown
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startProgress begins reporting a read of view (empty: the whole stream) in phase.
func (s *stream) startProgress(view, phase string) *progress {
	p := &progress{stream: s.cfg.Topic, view: view, phase: phase, started: time.Now(),
		counter: s.m.readRows.WithLabelValues(s.cfg.Topic, view, phase), stop: make(chan struct{})}
	interval := s.d.cfg.ProgressInterval
	if interval <= 0 {
		return p
	}
	log := s.log
	p.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		last, lastAt := int64(0), p.started
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				n := p.rows.Load()
				attrs := []any{"stream", p.stream, "view", p.view, "phase", p.phase, "rows", n,
					"rows_per_s", int64(float64(n-last) / now.Sub(lastAt).Seconds()), "elapsed", now.Sub(p.started).Round(time.Second)}
				if e := p.estimate.Load(); e > 0 {
					attrs = append(attrs, "estimate", e, "percent", min(100, n*100/e))
				}
				log.Info("progress", attrs...)
				last, lastAt = n, now
			}
		}
	})
	return p
}

// expect sets the estimate of the rows the read will count.
func (p *progress) expect(n int64) {
	if p != nil {
		p.estimate.Store(n)
	}
}

// row counts one row read.
func (p *progress) row() {
	if p == nil {
		return
	}
	p.local++
	if p.local == progressBatch {
		p.flush()
	}
}

func (p *progress) flush() {
	p.rows.Add(p.local)
	p.counter.Add(float64(p.local))
	p.local = 0
}

// end stops the reports (it returns once the log goroutine has ended) and returns the
// read's duration.
func (p *progress) end() time.Duration {
	if p == nil {
		return 0
	}
	p.flush()
	close(p.stop)
	p.wg.Wait()
	return time.Since(p.started)
}
