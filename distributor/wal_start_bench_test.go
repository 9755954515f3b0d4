package distributor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// restoredAt is a log handler that notes when the state was restored from the topic (to
// split a restart into the topic's read and what follows it), passing every record on.
type restoredAt struct {
	slog.Handler
	mu *sync.Mutex
	at *time.Time
}

func (h restoredAt) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "state restored from the topic" {
		h.mu.Lock()
		*h.at = time.Now()
		h.mu.Unlock()
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h restoredAt) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.Handler.Enabled(ctx, l)
}

func (h restoredAt) WithAttrs(as []slog.Attr) slog.Handler {
	return restoredAt{h.Handler.WithAttrs(as), h.mu, h.at}
}

func (h restoredAt) WithGroup(name string) slog.Handler {
	return restoredAt{h.Handler.WithGroup(name), h.mu, h.at}
}

// BenchmarkWALRestart measures the restart of a wal stream with one view of N rows (env
// DIST_BENCH_ROWS, default 1000000), from Run to WaitReady (the first cycle published:
// serving), after 1000 rows changed while it was down. Two views, each in a stream of its
// own: "key", a single-table view (mapped by its key), and "join", the same rows joined to
// a table of 1000 categories (mapped through a column that is not the key: it has reverse
// maps). It logs the first start (the snapshot), the restart, and how many records the
// restart published; the restart is split into the topic's read (restore, the
// same in every version) and what follows it until serving.
//
// Run: set -a; . .run/env; set +a;
// go test -run '^$' -bench BenchmarkWALRestart -benchtime 1x -timeout 60m ./distributor/
func BenchmarkWALRestart(b *testing.B) {
	n := 1000000
	if s := os.Getenv("DIST_BENCH_ROWS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newBenchEnv(b)
	e.exec(`CREATE TABLE cats (id int PRIMARY KEY, label text NOT NULL)`)
	e.exec(`INSERT INTO cats SELECT i, 'category-' || i FROM generate_series(0, 999) i`)
	e.exec(`CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL REFERENCES cats,
		price numeric(12,2) NOT NULL, note text NOT NULL, updated_at timestamptz NOT NULL)`)
	e.exec(fmt.Sprintf(`INSERT INTO bench SELECT i, 'name-' || i, i %% 1000, (i %% 100000) / 100.0,
		repeat(md5(i::text), 3), '2026-01-01'::timestamptz + i * interval '1 ms' FROM generate_series(1, %d) i`, n))
	e.exec(`VACUUM ANALYZE bench`)
	views := map[string]ViewConfig{
		"key": {Name: "bench", SQL: "SELECT id, name, qty, price, note, updated_at FROM bench", Key: []string{"id"}},
		"join": {Name: "bench", SQL: `SELECT b.id, b.name, b.qty, b.price, b.note, b.updated_at, c.label
			FROM bench b JOIN cats c ON c.id = b.qty`, Key: []string{"id"}},
	}
	for _, name := range []string{"key", "join"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				e.topic = fmt.Sprintf("bench_restart_%s_%d", name, time.Now().UnixNano())
				deleteTopicLater(b, e.brokers, e.topic)
				cfg := e.config(views[name])
				cfg.Streams[0].Capture = CaptureWAL
				dropSlotLater(b, slotName(e.topic))
				var mu sync.Mutex
				var restored time.Time
				run := func() (took, restore time.Duration) {
					log := slog.New(restoredAt{benchLogger().Handler(), &mu, &restored})
					d, err := New(cfg, WithLogger(log))
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					start := time.Now()
					go func() { done <- d.Run(ctx) }()
					if err := d.WaitReady(context.Background()); err != nil {
						b.Fatal(err)
					}
					took = time.Since(start)
					cancel()
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					mu.Lock()
					defer mu.Unlock()
					return took, restored.Sub(start)
				}
				first, _ := run()
				before := readAllB(b, e.brokers, e.topic)
				e.exec(`UPDATE bench SET name = name || '+' WHERE id % 1000 = 0`)
				restart, restore := run()
				published := readAllB(b, e.brokers, e.topic) - before
				b.ReportMetric(restart.Seconds(), "restart-s")
				b.ReportMetric((restart - restore).Seconds(), "after-restore-s")
				b.Logf("%s: rows=%d first start (snapshot) %v, restart after 1000 rows changed %v (the topic read back %v, then serving after %v), records published by the restart %d",
					name, n, first.Round(time.Millisecond), restart.Round(time.Millisecond), restore.Round(time.Millisecond),
					(restart - restore).Round(time.Millisecond), published)
			}
		})
	}
}
