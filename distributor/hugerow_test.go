package distributor

import (
	"fmt"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// memPeaks are the peaks memPeak samples.
type memPeaks struct {
	heap uint64 // live objects and the dead ones not yet swept: what the process holds for them
	live uint64 // the heap marked live by a collection
	held uint64 // the memory the Go runtime holds from the OS (the RSS but for C and the race detector's shadow)
}

// memPeak samples the memory every few milliseconds until stop, and returns the peaks.
func memPeak() (stop func() memPeaks) {
	runtime.GC() // the earlier tests' garbage is not this test's
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var p memPeaks
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(s)
			p.heap = max(p.heap, s[0].Value.Uint64())
			p.held = max(p.held, s[1].Value.Uint64()-s[2].Value.Uint64())
			p.live = max(p.live, s[3].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() memPeaks { close(done); wg.Wait(); return p }
}

// Production runs the distributor with a 768 MiB memory limit and GOMEMLIMIT=691MiB
// (deploy/kubernetes/overlays/production/distributor.yaml).
const (
	podLimit   = 768 << 20
	goMemLimit = 691 << 20
	hugeRow    = 300 << 20
)

// hugeInsert inserts a row of a hugeRow-byte value made by the server (the test's own
// process holds nothing of it).
func hugeInsert(e *env, table, cols, values string) {
	e.exec(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM (SELECT repeat('x', %d) AS x) h", table, cols, values, hugeRow))
}

// viewFailed reports whether the view is stopped with an error holding every one of want.
func viewFailed(r *running, view string, want ...string) func() bool {
	return func() bool {
		st := r.d.Status()
		if len(st) == 0 {
			return false
		}
		for _, v := range st[0].Views {
			if v.Name != view || v.Failed == "" {
				continue
			}
			for _, w := range want {
				if !strings.Contains(v.Failed, w) {
					return false
				}
			}
			return true
		}
		return false
	}
}

// checkPeak fails the test when the heap peaked over production's GOMEMLIMIT.
func checkPeak(t *testing.T, stop func() memPeaks) {
	t.Helper()
	p := stop()
	t.Logf("with a %d MiB row: heap peak %d MiB, live heap peak %d MiB, runtime's memory from the OS %d MiB (GOMEMLIMIT %d MiB, pod limit %d MiB)",
		hugeRow>>20, p.heap>>20, p.live>>20, p.held>>20, goMemLimit>>20, podLimit>>20)
	if p.heap > goMemLimit {
		t.Fatalf("heap peaked at %d MiB, over GOMEMLIMIT's %d MiB (the pod's limit is %d MiB)", p.heap>>20, goMemLimit>>20, podLimit>>20)
	}
}

// The views of the huge-row tests: big's rows hold a bytea (mapped by big's id); labels
// maps big's changes through big.label, which the receiver captures.
func (e *env) hugeRowViews() []ViewConfig {
	e.createItems()
	e.exec("CREATE TABLE big (id int PRIMARY KEY, b bytea, label text)")
	return []ViewConfig{
		{Name: "items", SQL: itemsSQL, Key: []string{"id"}},
		{Name: "big", SQL: "SELECT id, b FROM big", Key: []string{"id"}},
		{Name: "labels", SQL: "SELECT i.id, i.name FROM items i JOIN big ON big.label = i.name", Key: []string{"id"}},
	}
}

// TestHugeRowWithinMemory: a 300 MiB row, far over the record size limit, is refused —
// its view stops with an error naming the view, the column, the value's size and the
// limit — while the distributor's heap stays within production's memory limit, and the
// other views of the stream go on publishing. The row reaches the distributor twice over
// the wire, in pgoutput's message of the insert and in the re-read of its view's row,
// each read whole into a buffer by pgconn; it is copied besides neither by the message's
// parse (the receiver copies only the captured values, and a captured value over the
// limit not even that) nor by the record's encoding (refused before it; a 256 MiB row used
// to peak at 1 GiB of heap). A huge captured value (labels maps big through its label)
// makes labels re-read big in full, which holds no huge row of labels: labels reads on.
func TestHugeRowWithinMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 300 MiB row")
	}
	e := newEnv(t)
	cfg := e.walConfig(e.hugeRowViews()...)
	// One reader: each of a cycle's read connections may hold a huge row at once (a
	// make test run with read_connections 4 saw three at the heap's peak, 905 MiB), which
	// docs/security.md tells such a stream to avoid.
	cfg.Streams[0].ReadConnections = 1
	old := debug.SetMemoryLimit(goMemLimit)
	defer debug.SetMemoryLimit(old)
	r := start(t, cfg)
	r.waitReady(t)

	stop := memPeak()
	hugeInsert(e, "big", "id, b, label", "1, convert_to(x, 'SQL_ASCII'), 'apple'")
	e.exec("UPDATE items SET name = 'after the big row' WHERE id = 1")
	waitCond(t, "the big view stopped on the record size limit, naming the column and the sizes", viewFailed(r, "big",
		`view "big" column "b"`, fmt.Sprintf("this column's value %d bytes", hugeRow), "exceeds the broker's message limit", "refused before encoding"))
	waitFor(t, e, "the items view's change", func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "items")["items|1"], "after the big row")
	})

	// A huge captured value: big's label, which labels maps big's changes by.
	hugeInsert(e, "big", "id, label", "2, x")
	e.exec("INSERT INTO big VALUES (3, NULL, 'plum')")
	e.exec("UPDATE items SET name = 'after the big label' WHERE id = 2")
	waitFor(t, e, "labels' row of big's row 3, and items' change after the huge label", func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "items")["items|2"], "after the big label") && rowsOf(recs, "labels")["labels|3"] != ""
	})
	checkPeak(t, stop)
	if viewFailed(r, "labels")() || viewFailed(r, "items")() {
		t.Fatalf("a view without the huge value stopped: %+v", r.d.Status()[0].Views)
	}
}

// TestHugeRowSnapshot: a 300 MiB row already in the table when the stream starts is
// refused by its view's first read (the snapshot), before it is encoded, and the other
// views publish their snapshot; the heap stays within production's memory limit.
func TestHugeRowSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("a 300 MiB row")
	}
	e := newEnv(t)
	cfg := e.walConfig(e.hugeRowViews()...)
	hugeInsert(e, "big", "id, b, label", "1, convert_to(x, 'SQL_ASCII'), 'plum'")
	old := debug.SetMemoryLimit(goMemLimit)
	defer debug.SetMemoryLimit(old)
	stop := memPeak()
	r := start(t, cfg)
	waitCond(t, "the big view stopped on the record size limit, naming the column", viewFailed(r, "big",
		`view "big" column "b"`, "exceeds the broker's message limit", "refused before encoding"))
	waitFor(t, e, "the snapshots of items and labels", func(recs []rec) bool {
		return len(rowsOf(recs, "items")) == 3 && rowsOf(recs, "labels")["labels|3"] != ""
	})
	e.exec("UPDATE items SET name = 'after the snapshot' WHERE id = 1")
	waitFor(t, e, "the items view's change", func(recs []rec) bool {
		return strings.Contains(rowsOf(recs, "items")["items|1"], "after the snapshot")
	})
	checkPeak(t, stop)
}
