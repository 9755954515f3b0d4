package parallel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// orderChecker records handler starts and ends and reports ordering violations by name.
type orderChecker struct {
	mu        sync.Mutex
	ordering  Ordering
	running   map[string]bool // per key (or "" for partition)
	lastOff   map[string]int64
	seen      map[int64]int
	active    int
	maxActive int
	errs      []error
}

func newOrderChecker(o Ordering) *orderChecker {
	return &orderChecker{ordering: o, running: map[string]bool{}, lastOff: map[string]int64{}, seen: map[int64]int{}}
}

func (c *orderChecker) scope(r Record[int]) (string, bool) {
	switch c.ordering {
	case OrderKey:
		return string(r.Key), true
	case OrderPartition:
		return "", true
	}
	return "", false
}

func (c *orderChecker) start(r Record[int]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active++
	c.maxActive = max(c.maxActive, c.active)
	c.seen[r.Offset]++
	if c.seen[r.Offset] > 1 {
		c.errs = append(c.errs, fmt.Errorf("unique: offset %d processed twice", r.Offset))
	}
	if s, ok := c.scope(r); ok {
		if c.running[s] {
			c.errs = append(c.errs, fmt.Errorf("serial: key %q offset %d overlaps another", s, r.Offset))
		}
		c.running[s] = true
		if last, ok := c.lastOff[s]; ok && last >= r.Offset {
			c.errs = append(c.errs, fmt.Errorf("ordered: key %q offset %d after %d", s, r.Offset, last))
		}
		c.lastOff[s] = r.Offset
	}
}

func (c *orderChecker) end(r Record[int]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if s, ok := c.scope(r); ok {
		c.running[s] = false
	}
}

func TestOrderingProperties(t *testing.T) {
	for _, ordering := range []Ordering{OrderKey, OrderPartition, OrderUnordered} {
		for _, keys := range []int{1, 3, 50} {
			for _, batch := range []int{1, 4} {
				t.Run(fmt.Sprintf("%v/keys=%d/batch=%d", ordering, keys, batch), func(t *testing.T) {
					seed := uint64(keys*10 + batch + int(ordering)*1000)
					// The handlers' sleeps are virtual: they still overlap as real ones
					// would (the clock moves only once every worker is parked), in no time.
					synctest.Test(t, func(t *testing.T) { checkOrdering(t, ordering, keys, batch, seed) })
				})
			}
		}
	}
}

func checkOrdering(t *testing.T, ordering Ordering, keys, batch int, seed uint64) {
	const n = 400
	const workers = 8
	chk := newOrderChecker(ordering)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	delays := rand.New(rand.NewPCG(seed, 2))
	delay := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(delays.IntN(300)) * time.Microsecond
	}
	handle := func(r Record[int]) {
		chk.start(r)
		time.Sleep(delay())
		chk.end(r)
	}
	cfg := Config[int]{Ordering: ordering, MaxConcurrency: workers, MaxBufferedRecords: 64}
	if batch == 1 {
		cfg.Handler = func(_ context.Context, r Record[int]) error { handle(r); return nil }
	} else {
		cfg.BatchSize = batch
		cfg.BatchHandler = func(_ context.Context, rs []Record[int]) error {
			if len(rs) > batch {
				t.Errorf("batch of %d > %d", len(rs), batch)
			}
			var wg sync.WaitGroup
			for _, r := range rs {
				wg.Go(func() { handle(r) })
			}
			wg.Wait()
			return nil
		}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	for i := range n {
		off += 1 + int64(rng.IntN(3)) // gaps
		key := []byte(fmt.Sprint(rng.IntN(keys)))
		if keys == 3 && i%7 == 0 {
			key = nil // nil keys form one queue
		}
		if err := e.Submit(context.Background(), Record[int]{Key: key, Offset: off, Value: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		t.Fatal(err)
	}
	for _, err := range chk.errs {
		t.Error(err)
	}
	if len(chk.seen) != n {
		t.Errorf("reliable: %d of %d records processed", len(chk.seen), n)
	}
	if chk.maxActive > workers*batch {
		t.Errorf("concurrency %d > %d", chk.maxActive, workers*batch)
	}
	if ordering == OrderPartition && chk.maxActive != 1 {
		t.Errorf("partition ordering ran %d at once", chk.maxActive)
	}
	// A busy worker's virtual sleep parks it, so the others take the other keys' records
	// before the clock moves: with several keys, records must have run at once.
	if ordering != OrderPartition && keys > 1 && chk.maxActive < 2 {
		t.Errorf("ordering %v over %d keys never ran two records at once", ordering, keys)
	}
	if p := e.Progress(); p.Watermark != off+1 || p.Metadata != "" {
		t.Errorf("final progress %+v, want watermark %d and no metadata", p, off+1)
	}
	if s := e.Stats(); s.Completed != n || s.InFlight != 0 || s.Queued != 0 {
		t.Errorf("stats %+v", s)
	}
}

func newEngine(t *testing.T, cfg Config[int]) *Engine[int] {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func submit(t *testing.T, e *Engine[int], key string, off int64) {
	t.Helper()
	if err := e.Submit(context.Background(), Record[int]{Key: []byte(key), Offset: off}); err != nil {
		t.Fatalf("submit %d: %v", off, err)
	}
}

// settled waits, in a synctest bubble, until every goroutine of the bubble is blocked, and
// checks cond then: the engine has done all it can without the clock moving, so cond holds
// now or never will.
func settled(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("not %s once the engine settled", what)
	}
}

// TestRetryKeepsKeyOrder: a failing record is retried after the backoff of each attempt,
// and the later records of its key wait for it.
func TestRetryKeepsKeyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []int64
		fails := map[int64]int{1: 2} // offset 1 fails twice
		e := newEngine(t, Config[int]{
			MaxAttempts: 3,
			Backoff:     func(a int) time.Duration { return time.Duration(a) * time.Millisecond },
			Handler: func(_ context.Context, r Record[int]) error {
				mu.Lock()
				defer mu.Unlock()
				if fails[r.Offset] > 0 {
					fails[r.Offset]--
					return errors.New("transient")
				}
				order = append(order, r.Offset)
				return nil
			},
		})
		start := time.Now()
		for off := int64(1); off <= 5; off++ {
			submit(t, e, "k", off)
		}
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(order) != "[1 2 3 4 5]" {
			t.Fatalf("order %v", order)
		}
		if s := e.Stats(); s.Retried != 2 || s.Completed != 5 || s.Failed != 0 {
			t.Fatalf("stats %+v", s)
		}
		// The handlers take no time: the drain took the two backoffs, 1 ms then 2 ms.
		if d := time.Since(start); d != 3*time.Millisecond {
			t.Fatalf("drained after %v, want the backoffs' 3ms", d)
		}
	})
}

func TestBackoffSeesAttempt(t *testing.T) {
	var got []int
	var mu sync.Mutex
	e := newEngine(t, Config[int]{
		MaxAttempts: 4,
		OnFailure:   FailSkip,
		Backoff: func(a int) time.Duration {
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
			return 0
		},
		Handler: func(context.Context, Record[int]) error { return errors.New("always") },
	})
	submit(t, e, "k", 0)
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("backoff attempts %v", got)
	}
}

func TestPoisonToDeadLetterOthersContinue(t *testing.T) {
	var dlq []int64
	var processed atomic.Int64
	var mu sync.Mutex
	e := newEngine(t, Config[int]{
		MaxAttempts: 2,
		Backoff:     func(int) time.Duration { return 0 },
		OnFailure:   FailSkip,
		DeadLetter: func(_ context.Context, r Record[int], err error) {
			mu.Lock()
			dlq = append(dlq, r.Offset)
			mu.Unlock()
		},
		Handler: func(_ context.Context, r Record[int]) error {
			if r.Value == -1 {
				return errors.New("poison")
			}
			processed.Add(1)
			return nil
		},
	})
	for off := int64(0); off < 100; off++ {
		v := 0
		if off == 10 {
			v = -1
		}
		_ = e.Submit(context.Background(), Record[int]{Key: []byte(fmt.Sprint(off % 5)), Offset: off, Value: v})
	}
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dlq) != "[10]" || processed.Load() != 99 {
		t.Fatalf("dlq %v processed %d", dlq, processed.Load())
	}
	if p := e.Progress(); p.Watermark != 100 {
		t.Fatalf("watermark %d", p.Watermark)
	}
	if s := e.Stats(); s.Failed != 1 || s.Retried != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFailStop(t *testing.T) {
	e := newEngine(t, Config[int]{
		MaxAttempts: 1,
		Handler: func(_ context.Context, r Record[int]) error {
			if r.Offset == 3 {
				return errors.New("boom")
			}
			return nil
		},
	})
	var err error
	for off := int64(0); off < 1000 && err == nil; off++ {
		err = e.Submit(context.Background(), Record[int]{Key: []byte("k"), Offset: off})
		if off == 3 {
			<-e.Done()
		}
	}
	var re *RecordError
	if !errors.As(err, &re) || re.Offset != 3 {
		t.Fatalf("submit err %v, want RecordError at 3", err)
	}
	if !errors.As(e.Err(), &re) {
		t.Fatalf("Err() = %v", e.Err())
	}
	if p := e.Progress(); p.Watermark != 3 {
		t.Fatalf("watermark %d, want 3", p.Watermark)
	}
}

// TestStuckKeyBoundedMemory: one key never finishes; intake stops at the buffer bound while
// other keys keep completing.
func TestStuckKeyBoundedMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var done atomic.Int64
		const limit = 100
		e := newEngine(t, Config[int]{
			MaxBufferedRecords: limit,
			Handler: func(_ context.Context, r Record[int]) error {
				if string(r.Key) == "stuck" {
					<-release
				}
				done.Add(1)
				return nil
			},
		})
		submit(t, e, "stuck", 0)
		off := int64(1)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := e.Submit(ctx, Record[int]{Key: []byte(fmt.Sprint(off)), Offset: off})
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			off++
			if off > 100*limit {
				t.Fatal("intake never paused behind a stuck key")
			}
		}
		// A Submit's deadline passes only once nothing else can happen: the stuck watermark
		// alone stopped intake, after exactly the bound, and every other key had completed.
		if off != limit {
			t.Fatalf("accepted %d records behind a stuck watermark, bound %d", off, limit)
		}
		if got := done.Load(); got != off-1 {
			t.Fatalf("%d of the %d records of other keys completed behind the stuck key", got, off-1)
		}
		s := e.Stats()
		if s.Watermark != 0 || s.InFlight != 1 || s.Queued != 0 {
			t.Fatalf("stats %+v, want only the stuck record in flight", s)
		}
		if p := e.Progress(); len(p.Metadata) > DefaultMaxMetadataBytes {
			t.Fatalf("metadata %d bytes", len(p.Metadata))
		}
		close(release)
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
		if got := done.Load(); got != off {
			t.Fatalf("processed %d, want %d", got, off)
		}
		if p := e.Progress(); p.Watermark != off {
			t.Fatalf("watermark %d, want %d", p.Watermark, off)
		}
	})
}

// TestMetadataPause: alternating stuck/complete offsets grow the completed set; at 75 % of
// MaxMetadataBytes intake pauses, and the encoded metadata stays within the bound.
func TestMetadataPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		const maxMeta = 64
		e := newEngine(t, Config[int]{
			MaxMetadataBytes:   maxMeta,
			MaxBufferedRecords: 1 << 20, // only the metadata rule may pause intake
			Handler: func(_ context.Context, r Record[int]) error {
				if string(r.Key) == "stuck" {
					<-release
				}
				return nil
			},
		})
		off := int64(0)
		for {
			key := "stuck"
			if off%2 == 1 {
				key = fmt.Sprint(off)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := e.Submit(ctx, Record[int]{Key: []byte(key), Offset: off * 1000}) // sparse offsets
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			off++
			if off > 1<<19 {
				t.Fatalf("intake never paused: %+v", e.Stats())
			}
		}
		s := e.Stats()
		if !s.Paused || s.MetadataBytes*4 < maxMeta*3 {
			t.Fatalf("stats %+v, want paused at 75%%", s)
		}
		p := e.Progress()
		if len(p.Metadata) == 0 || len(p.Metadata) > maxMeta {
			t.Fatalf("metadata %d bytes, bound %d", len(p.Metadata), maxMeta)
		}
		if c, err := DecodeCheckpoint(p.Watermark, p.Metadata); err != nil || len(c.Completed) == 0 {
			t.Fatalf("decode: %v %+v", err, c)
		}
		close(release)
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
		if p := e.Progress(); p.Watermark != (off-1)*1000+1 || p.Metadata != "" {
			t.Fatalf("final %+v", p)
		}
	})
}

func TestShutdownModes(t *testing.T) {
	for _, mode := range []ShutdownMode{Drain, NoDrain} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testShutdownMode(t, mode) }) })
	}
}

func testShutdownMode(t *testing.T, mode ShutdownMode) {
	gate := make(chan struct{})
	var processed atomic.Int64
	e := newEngine(t, Config[int]{
		Handler: func(_ context.Context, r Record[int]) error {
			if r.Offset == 0 {
				<-gate
			}
			processed.Add(1)
			return nil
		},
	})
	for off := int64(0); off < 50; off++ {
		submit(t, e, "k", off)
	}
	settled(t, "the first record running", func() bool { return e.Stats().InFlight == 1 })
	errc := make(chan error, 1)
	go func() { errc <- e.Shutdown(context.Background(), mode) }()
	settled(t, "intake closed", func() bool {
		return errors.Is(e.Submit(context.Background(), Record[int]{Offset: 0}), ErrClosed)
	})
	close(gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := int64(50)
	if mode == NoDrain {
		want = 1
	}
	if processed.Load() != want || e.Progress().Watermark != want {
		t.Fatalf("processed %d watermark %d, want %d", processed.Load(), e.Progress().Watermark, want)
	}
}

func TestShutdownTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config[int]{
			Handler: func(ctx context.Context, r Record[int]) error {
				<-ctx.Done()
				return ctx.Err()
			},
		})
		submit(t, e, "k", 0)
		settled(t, "running", func() bool { return e.Stats().InFlight == 1 })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := e.Shutdown(ctx, Drain); !errors.Is(err, ErrShutdownTimeout) {
			t.Fatalf("err %v", err)
		}
		<-e.Done()
		if p := e.Progress(); p.Watermark != 0 {
			t.Fatalf("watermark %d", p.Watermark)
		}
	})
}

func TestResumeSkipsCompleted(t *testing.T) {
	var mu sync.Mutex
	var got []int64
	e := newEngine(t, Config[int]{
		Resume: &Checkpoint{Watermark: 5, Completed: []Range{{7, 8}, {9, 10}}},
		Handler: func(_ context.Context, r Record[int]) error {
			mu.Lock()
			got = append(got, r.Offset)
			mu.Unlock()
			return nil
		},
	})
	for off := int64(3); off <= 11; off++ {
		submit(t, e, "k", off)
	}
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[5 6 8 10 11]" {
		t.Fatalf("processed %v", got)
	}
	if p := e.Progress(); p.Watermark != 12 {
		t.Fatalf("watermark %d", p.Watermark)
	}
}

func TestSubmitErrors(t *testing.T) {
	e := newEngine(t, Config[int]{Handler: func(context.Context, Record[int]) error { return nil }})
	submit(t, e, "k", 5)
	if err := e.Submit(context.Background(), Record[int]{Offset: 5}); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("err %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	h := func(context.Context, Record[int]) error { return nil }
	tests := []struct {
		name string
		cfg  Config[int]
		ok   bool
	}{
		{"defaults", Config[int]{Handler: h}, true},
		{"no handler", Config[int]{}, false},
		{"both handlers", Config[int]{Handler: h, BatchHandler: func(context.Context, []Record[int]) error { return nil }}, false},
		{"bad ordering", Config[int]{Handler: h, Ordering: 7}, false},
		{"bad policy", Config[int]{Handler: h, OnFailure: 7}, false},
		{"negative", Config[int]{Handler: h, MaxConcurrency: -1}, false},
		{"tiny metadata", Config[int]{Handler: h, MaxMetadataBytes: 10}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v", err)
			}
			if e != nil {
				_ = e.Close()
			}
		})
	}
}

func TestHandlerPanicIsAnError(t *testing.T) {
	var dlErr error
	e := newEngine(t, Config[int]{
		MaxAttempts: 2,
		Backoff:     func(int) time.Duration { return 0 },
		OnFailure:   FailSkip,
		DeadLetter:  func(_ context.Context, _ Record[int], err error) { dlErr = err },
		Handler: func(_ context.Context, r Record[int]) error {
			if r.Offset == 1 {
				panic("bad record")
			}
			return nil
		},
	})
	for off := int64(0); off < 3; off++ {
		submit(t, e, "k", off)
	}
	if err := e.Shutdown(context.Background(), Drain); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dlErr, ErrHandlerPanic) {
		t.Fatalf("dead letter error %v", dlErr)
	}
	if s := e.Stats(); s.Completed != 2 || s.Failed != 1 || s.Retried != 1 || s.Watermark != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPausedDispatchesOnlyWatermark: at 75 % of MaxMetadataBytes, records that do not advance
// the watermark stay queued even with idle workers; when the watermark moves, work resumes.
func TestPausedDispatchesOnlyWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gateW, gateS := make(chan struct{}), make(chan struct{})
		var onceW, onceS sync.Once
		openW := func() { onceW.Do(func() { close(gateW) }) }
		openS := func() { onceS.Do(func() { close(gateS) }) }
		sDone := make(chan int64, 1000)
		e := newEngine(t, Config[int]{
			MaxConcurrency:     8,
			MaxMetadataBytes:   64,
			MaxBufferedRecords: 1 << 20,
			Handler: func(_ context.Context, r Record[int]) error {
				switch string(r.Key) {
				case "w":
					<-gateW
				case "s":
					<-gateS
					sDone <- r.Offset
				}
				return nil
			},
		})
		t.Cleanup(func() { openW(); openS() }) // runs before the engine's Close
		submit(t, e, "w", 0)
		off, nS := int64(1), 0
		for ; ; off++ {
			key := "s"
			if off%2 == 0 {
				key = fmt.Sprint("u", off)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := e.Submit(ctx, Record[int]{Key: []byte(key), Offset: off})
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if key == "s" {
				nS++
			}
		}
		// Unique-key records queued when the pause began stay queued; only w and the first s run.
		settled(t, "only w and the first s in flight", func() bool {
			s := e.Stats()
			return s.Paused && s.InFlight == 2 && s.Queued >= nS-1
		})
		openS() // the first s finishes; the next s becomes ready but must not start
		<-sDone
		settled(t, "the next s ready", func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.running == 1 && e.inFlight == 1
		})
		e.mu.Lock()
		stillPaused, ready, inFlight := e.paused(), e.ready.len(), e.inFlight
		taken := e.take(nil)
		e.mu.Unlock()
		if !stillPaused || ready < 1 || inFlight != 1 || taken != nil {
			t.Fatalf("paused=%v ready=%d inFlight=%d take=%v: a record other than the watermark was dispatched", stillPaused, ready, inFlight, taken)
		}
		openW()
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
		if p := e.Progress(); p.Watermark != off {
			t.Fatalf("watermark %d, want %d", p.Watermark, off)
		}
	})
}

func TestByteBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(gate) }) }
		e := newEngine(t, Config[int]{
			MaxBufferedBytes: 250,
			Handler: func(context.Context, Record[int]) error {
				<-gate
				return nil
			},
		})
		t.Cleanup(open)
		for off := int64(0); off < 2; off++ {
			if err := e.Submit(context.Background(), Record[int]{Key: []byte(fmt.Sprint(off)), Offset: off, Size: 100}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := e.Submit(ctx, Record[int]{Key: []byte("x"), Offset: 2, Size: 100}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("third 100-byte record under a 250-byte bound: %v", err)
		}
		// A record larger than the bound is admitted once the buffer is empty.
		open()
		if err := e.Submit(context.Background(), Record[int]{Key: []byte("big"), Offset: 3, Size: 1000}); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
	})
}
