package capture

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/internal/testenv"
)

// BenchmarkSlotCost measures what logical slots cost the database: N slots (one per
// stream, each with its own walsender decoding the whole WAL) stream the same workload,
// and the CPU time of the N walsender processes is read from /proc before and after.
// Baseline: the same workload with one slot, in the same run.
//
//	go test -run '^$' -bench SlotCost -benchtime 1x ./distributor/internal/capture/
func BenchmarkSlotCost(b *testing.B) {
	ctx := context.Background()
	dsn := testenv.NewDatabase(b)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE other (id int PRIMARY KEY, v text);
		CREATE PUBLICATION pub_cost FOR TABLE t`); err != nil {
		b.Fatal(err)
	}
	const rows = 50000
	var base float64
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			for range b.N {
				cpu, d := slotCost(b, ctx, conn, dsn, n, rows)
				if n == 1 {
					base = cpu
				}
				b.ReportMetric(cpu, "walsender-cpu-s")
				b.ReportMetric(cpu/float64(n)*1000, "cpu-ms/slot")
				b.ReportMetric(float64(rows)/d.Seconds(), "rows/s")
				if base > 0 {
					b.ReportMetric(cpu/base, "x-one-slot")
				}
			}
		})
	}
	for _, tbl := range []string{"t", "other"} {
		_, _ = conn.Exec(ctx, "TRUNCATE "+tbl)
	}
}

// slotCost streams a workload of rows changes (half in the published table, half in
// another one: a walsender decodes every change) to n slots and returns the walsenders'
// CPU seconds and how long until every slot had received all of it.
func slotCost(b *testing.B, ctx context.Context, conn *pgx.Conn, dsn string, n, rows int) (float64, time.Duration) {
	b.Helper()
	type stream struct {
		repl *pgconn.PgConn
		recv *Receiver
		sub  *Sub
		slot string
		done chan error
	}
	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT 't'::regclass::oid").Scan(&oid); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var streams []*stream
	defer func() {
		cancel()
		for _, s := range streams {
			<-s.done
			s.repl.Close(ctx)
			_ = DropSlot(ctx, conn, s.slot)
		}
	}()
	for i := 0; i < n; i++ {
		repl, err := pgconn.Connect(ctx, dsn+"&replication=database&application_name=slotcost")
		if err != nil {
			b.Fatal(err)
		}
		s := &stream{repl: repl, slot: testenv.UniqueName("cost"), done: make(chan error, 1)}
		at, _, err := CreateSlot(ctx, repl, s.slot)
		if err != nil {
			b.Fatal(err)
		}
		s.recv = NewReceiver(repl, ReceiverConfig{Slot: s.slot, Publication: "pub_cost", Start: at, Tables: map[uint32]TableColumns{oid: {Names: []string{"id"}, Identity: 1}}})
		s.sub = s.recv.Subscribe([]uint32{oid})
		go func() { s.done <- s.recv.Run(rctx) }()
		streams = append(streams, s)
	}
	// the walsenders, once every stream is streaming
	var pids []int
	for {
		rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_replication WHERE application_name = 'slotcost'")
		if err != nil {
			b.Fatal(err)
		}
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		if len(pids) == n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := cpuOf(b, pids)
	start := time.Now()
	for i := 0; i < rows/1000; i++ {
		tbl := "t"
		if i%2 == 1 {
			tbl = "other"
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT g, md5(g::text) FROM generate_series(%d, %d) g ON CONFLICT (id) DO UPDATE SET v = excluded.v",
			tbl, i*1000, i*1000+999)); err != nil {
			b.Fatal(err)
		}
	}
	var end string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&end); err != nil {
		b.Fatal(err)
	}
	endLSN, _ := ParseLSN(end)
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, _, err := s.sub.Take(ctx, endLSN); err == nil || ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	return cpuOf(b, pids) - before, d
}

// cpuOf returns the user + system CPU seconds of the processes pids (from /proc).
func cpuOf(b *testing.B, pids []int) float64 {
	b.Helper()
	ticks := 0.0
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Skipf("walsender CPU: %v (the database must run on this machine)", err)
		}
		// the fields after the command name (which may hold spaces): utime and stime are
		// the 12th and 13th of them
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		ticks += u + s
	}
	return ticks / 100 // USER_HZ
}
