package distributor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/schemas/record"
)

// TestShutdownMidEpoch: a shutdown during the start-up epoch leaves nothing of it in the
// stream (the epoch is one Kafka transaction, aborted); the next start publishes the
// whole view in one epoch, which reuses the number no reader saw.
func TestShutdownMidEpoch(t *testing.T) {
	const n = 100000
	e := newEnv(t)
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, v text NOT NULL)`)
	e.exec(`INSERT INTO big SELECT i, repeat('x', 100) FROM generate_series(1, $1) i`, n)
	cfg := e.config(ViewConfig{Name: "big", SQL: "SELECT id, v FROM big", Key: []string{"id"}})
	// The publisher stops feeding the producer after 2000 records of the epoch and waits
	// for the shutdown there: the epoch cannot finish first, whatever the machine's speed.
	const pauseAt = 2000
	paused := make(chan struct{})
	var fed int
	r := start(t, cfg, func(d *Distributor) {
		d.sendHook = func(ctx context.Context, _ string) {
			if fed++; fed == pauseAt {
				close(paused)
				<-ctx.Done()
			}
		}
	})
	select {
	case <-paused:
	case <-time.After(2 * time.Minute):
		t.Fatal("the start-up epoch did not reach its pause point")
	}
	r.stop(t)
	recs := readAll(t, e.brokers, e.topic)
	if ends := countEnds(recs, "big"); ends != 0 {
		t.Fatalf("%d epoch-end records for an epoch stopped after %d of its %d rows", ends, pauseAt, n)
	}
	if len(recs) != 0 {
		t.Fatalf("an interrupted epoch left %d records in the stream:\n%s", len(recs), dump(recs[:min(len(recs), 10)]))
	}

	r2 := start(t, cfg)
	r2.waitReady(t)
	recs = readAll(t, e.brokers, e.topic)
	end := lastEnd(t, recs, "big")
	if end.Epoch != 1 || end.Rows != n || end.Published != n {
		t.Fatalf("epoch-end %+v: want epoch 1, %d rows, all published", end, n)
	}
	if got := len(rowsOf(recs, "big")); got != n {
		t.Fatalf("topic holds %d rows, want %d", got, n)
	}
	var begins []uint64
	for _, rc := range recs {
		if rc.meta.Kind == record.KindEpochBegin {
			begins = append(begins, rc.meta.Epoch)
		}
	}
	if len(begins) != 1 || begins[0] != 1 {
		t.Errorf("epoch begins %v", begins)
	}
}

// TestTwoStreams: one Distributor runs two streams (topics) with their own views.
func TestTwoStreams(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	cfg := e.config(itemsView())
	other := e.topic + "_b"
	deleteTopicLater(t, e.brokers, other)
	cfg.Streams = append(cfg.Streams, StreamConfig{Topic: other, Capture: CapturePoll, Views: []ViewConfig{
		{Name: "names", SQL: "SELECT name FROM items WHERE name IS NOT NULL", Key: []string{"name"}},
	}})
	r := start(t, cfg)
	r.waitReady(t)
	e.exec(`DELETE FROM items WHERE id = 3`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.d.Reconcile(ctx, "names"); err != nil {
		t.Fatal(err)
	}
	a := readAll(t, e.brokers, e.topic)
	b := readAll(t, e.brokers, other)
	if len(rowsOf(a, "items")) != 3 || len(rowsOf(a, "names")) != 0 {
		t.Errorf("stream a: %s", dump(a))
	}
	if got := rowsOf(b, "names"); len(got) != 2 || got["names|plum"] != "" {
		t.Errorf("stream b: %s", dump(b))
	}
}

// lockedWriter is an io.Writer that many goroutines may write to (the logger's output).
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestShutdownLogged: a graceful stop of a wal stream logs what it does, in order — the
// shutdown, the producer flushed and closed (no transaction left open on an idle stream),
// the lock released with the stream's source position, every stream stopped — with its
// durations readable in the daemons' JSON log (daemon.NewLogger).
func TestShutdownLogged(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE things (id int PRIMARY KEY, v text)`)
	e.exec(`INSERT INTO things VALUES (1, 'a'), (2, 'b')`)
	cfg := e.walConfig(ViewConfig{Name: "things", SQL: "SELECT id, v FROM things", Key: []string{"id"}})
	var out lockedWriter
	d, err := New(cfg, WithLogger(daemon.NewLogger(&out, slog.LevelInfo)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, finished: make(chan struct{})}
	go func() {
		r.err = d.Run(ctx)
		close(r.finished)
	}()
	t.Cleanup(func() { r.stop(t) })
	r.waitReady(t)
	waitCond(t, "a position record", func() bool { return d.Status()[0].SourcePosition != "" })
	r.stop(t)

	var msgs []string
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		msg, _ := m["msg"].(string)
		msgs = append(msgs, msg)
		lines[msg] = m
	}
	want := []string{"shutting down: ", "producer flushed and closed", "stream stopped: stream lock released", "every stream stopped"}
	i := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, want[0]) })
	if i < 0 {
		t.Fatalf("no shutdown line in the log:\n%s", out.String())
	}
	got := msgs[i:]
	for _, w := range want[1:] {
		j := slices.Index(got, w)
		if j < 0 {
			t.Fatalf("no %q after the shutdown line, in order; the lines after it: %q", w, msgs[i:])
		}
		got = got[j:]
	}
	closed := lines["producer flushed and closed"]
	if closed["stream"] != e.topic || closed["open_transaction_aborted"] != false {
		t.Errorf("producer line %v: want the stream, and no open transaction on an idle stream", closed)
	}
	if pos, _ := lines["stream stopped: stream lock released"]["source_position"].(string); pos == "" || pos != d.Status()[0].SourcePosition {
		t.Errorf("lock line %v: want the stream's source position %s", lines["stream stopped: stream lock released"], d.Status()[0].SourcePosition)
	}
	for _, msg := range []string{"producer flushed and closed", "every stream stopped"} {
		took, ok := lines[msg]["took"].(string)
		if _, err := time.ParseDuration(took); !ok || err != nil {
			t.Errorf("%s: took %v, want a readable duration", msg, lines[msg]["took"])
		}
	}
}
