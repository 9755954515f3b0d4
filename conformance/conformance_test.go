package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// clients are the drivers every scenario runs with.
var clients = []struct {
	name string
	make func(testing.TB) client
}{{"go", goClient}, {"java", javaClient}, {"java-okhttp", javaOkHTTPClient}}

// TestConformance runs every scenario with every client.
func TestConformance(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, c client)
	}{
		{"snapshot_and_live", scenarioSnapshotAndLive},
		{"player_restart", scenarioPlayerRestart},
		{"many_channel", scenarioManyChannel},
		{"kill9", scenarioKill9},
		{"state_file", scenarioStateFile},
		{"epoch_check", scenarioEpochCheck},
		{"tombstone_horizon", scenarioTombstoneHorizon},
		{"tls_and_token", scenarioTLSToken},
		{"mutual_tls", scenarioMutualTLS},
		{"selections", scenarioSelections},
		{"refused_view", scenarioRefusedView},
		{"postgres", scenarioPostgres},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			c := cl.make(t)
			for _, sc := range scenarios {
				if !c.supports(sc.name) {
					continue
				}
				t.Run(sc.name, func(t *testing.T) { sc.run(t, c) })
			}
		})
	}
}

// env is a fresh topic with a producer that writes records as the distributor does
// (schemas/README.md) and keeps what each view must hold.
type env struct {
	t       *testing.T
	brokers []string
	topic   string
	prod    sarama.SyncProducer

	mu   sync.Mutex
	want map[string]map[string]string // view -> held key -> value
}

func newEnv(t *testing.T) *env {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "conformance", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("conformance"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	return &env{t: t, brokers: brokers, topic: topic, prod: prod, want: map[string]map[string]string{}}
}

// row is one row of a write: view, key text, value ("" = tombstone).
type row struct{ view, key, value string }

// write writes rows as one source transaction ended by a position record at lsn.
func (e *env) write(lsn string, rows ...row) {
	e.t.Helper()
	var msgs []*sarama.ProducerMessage
	e.mu.Lock()
	for _, r := range rows {
		if e.want[r.view] == nil {
			e.want[r.view] = map[string]string{}
		}
		var value []byte
		held := record.JoinKey(r.key)
		if r.value != "" {
			value = []byte(r.value)
			e.want[r.view][held] = r.value
		} else {
			delete(e.want[r.view], held)
		}
		meta := record.Meta{View: r.view, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: lsn, Txn: true}
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(r.view, r.key), value, meta))
	}
	e.mu.Unlock()
	pos := &record.Position{LSN: lsn, Time: time.Now()}
	msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.PositionKey(), pos.Marshal(),
		record.Meta{Kind: record.KindPosition, SourceTime: pos.Time, SourceLSN: lsn}))
	if err := e.prod.SendMessages(msgs); err != nil {
		e.t.Fatal(err)
	}
}

// epochEnd writes an epoch-end record of view describing what it holds, its hash off by delta.
func (e *env) epochEnd(view string, delta uint64) {
	e.t.Helper()
	e.mu.Lock()
	var h record.EpochHash
	for k, v := range e.want[view] {
		h.Add(record.RowHashPrefixed(record.KeyPrefix(view), k, []byte(v)))
	}
	e.mu.Unlock()
	end := &record.EpochEnd{Epoch: 1, Rows: h.Rows(), Hash: h.Sum() + delta}
	meta := record.Meta{View: view, Kind: record.KindEpochEnd, Epoch: 1, SourceTime: time.Now()}
	if _, _, err := e.prod.SendMessage(recordsarama.ProducerMessage(e.topic, record.ControlKey(view, record.KindEpochEnd), end.Marshal(), meta)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) wantViews(views ...string) map[string]map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]map[string]string{}
	for _, v := range views {
		out[v] = maps.Clone(e.want[v])
		if out[v] == nil {
			out[v] = map[string]string{}
		}
	}
	return out
}

// lsnN is the source position of the n-th write.
func lsnN(n int) string { return fmt.Sprintf("0/%X", 0x1000+n*16) }

func value(id int, sport string, version int) string {
	return fmt.Sprintf(`{"id":%d,"sport":%q,"name":"event %d","version":%d}`, id, sport, id, version)
}

// fill writes n rows of events and of markets (ids from..from+n-1), one transaction each
// ten rows, starting at write number w; it returns the next write number.
func (e *env) fill(w, from, n, version int) int {
	var rows []row
	for i := from; i < from+n; i++ {
		rows = append(rows, row{"events", fmt.Sprint(i), value(i, []string{"football", "tennis"}[i%2], version)},
			row{"markets", fmt.Sprintf("%d|win", i), fmt.Sprintf(`{"event":%d,"odds":"%d.5"}`, i, version)})
		if len(rows) >= 20 {
			e.write(lsnN(w), rows...)
			w++
			rows = nil
		}
	}
	if len(rows) > 0 {
		e.write(lsnN(w), rows...)
		w++
	}
	return w
}

// startPlayer runs an in-process player on the topic until the test ends or stop is called.
func startPlayer(t testing.TB, e *env, mod func(*player.Config)) (addr string, stop func()) {
	t.Helper()
	cfg := player.Config{
		Insecure:         true,
		Kafka:            kafkaconn.Config{Brokers: e.brokers},
		Streams:          []player.StreamConfig{{Name: "s", Topic: e.topic}},
		ProgressInterval: 50 * time.Millisecond,
		ShutdownGrace:    time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := player.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = p.Run(context.Background()) }()
	go func() { defer wg.Done(); _ = p.Serve(lis) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { p.Close(); wg.Wait() }) }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// converge waits until the driver holds exactly want.
func converge(t *testing.T, p *proc, want map[string]map[string]string) event {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		d := p.dump()
		if equalViews(d.Views, want) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client did not converge: %s", diffViews(d.Views, want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func equalViews(got, want map[string]map[string]string) bool {
	for v, w := range want {
		if !maps.Equal(got[v], w) {
			return false
		}
	}
	return true
}

func diffViews(got, want map[string]map[string]string) string {
	var b strings.Builder
	for v, w := range want {
		g := got[v]
		n := 0
		for k, wv := range w {
			if gv, ok := g[k]; !ok || gv != wv {
				if n < 3 {
					fmt.Fprintf(&b, "view %s key %s: have %q, want %q; ", v, k, gv, wv)
				}
				n++
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				if n < 3 {
					fmt.Fprintf(&b, "view %s key %s: held, want absent; ", v, k)
				}
				n++
			}
		}
		fmt.Fprintf(&b, "view %s: %d of %d differ; ", v, n, len(w))
	}
	return b.String()
}

// checkDelivery checks what the recorder saw against the topic (ordered, unique,
// reliable, resumable).
func checkDelivery(t *testing.T, e *env, r *recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	truth, err := checker.ReadTopic(ctx, e.brokers, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.check.Check(truth); err != nil {
		t.Fatalf("delivery checker: %v", err)
	}
}

// checkChanges checks the listener's per-key order: each change of a key starts from the
// value the previous one left, and the last one leaves what the view holds.
func checkChanges(t *testing.T, p *proc, final map[string]map[string]string) {
	t.Helper()
	last := map[string]*string{}
	seen := 0
	for _, ev := range p.changeLog() {
		id := ev.View + "\x00" + ev.Key
		if prev, ok := last[id]; ok && !samePtr(prev, ev.Old) {
			t.Fatalf("view %s key %s: a change from %s follows one to %s (per-key order)", ev.View, ev.Key, show(ev.Old), show(prev))
		}
		last[id] = ev.New
		seen++
	}
	if seen == 0 {
		t.Fatal("the listener saw no change")
	}
	for id, v := range last {
		view, key, _ := strings.Cut(id, "\x00")
		want, ok := final[view][key]
		if (v == nil) == ok || v != nil && *v != want {
			t.Fatalf("view %s key %s: the last change left %s, the view holds %q", view, key, show(v), want)
		}
	}
}

func samePtr(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func show(s *string) string {
	if s == nil {
		return "(absent)"
	}
	return *s
}

var views = []string{"events", "markets"}

func scenarioSnapshotAndLive(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 200, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, Service: "conformance"})
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	// Live: updates, deletes and one transaction across both views.
	w = e.fill(w, 150, 100, 2)
	var del []row
	for i := 0; i < 40; i += 2 {
		del = append(del, row{"events", fmt.Sprint(i), ""}, row{"markets", fmt.Sprintf("%d|win", i), ""})
	}
	e.write(lsnN(w), del...)
	p.send(fmt.Sprintf(`{"cmd":"await_for","lsn":%q}`, lsnN(w)))
	p.next(time.Minute, "reached")
	// Read-your-writes: once the wait returned, the last transaction is visible whole.
	d := p.dump()
	if !equalViews(d.Views, e.wantViews(views...)) {
		t.Fatalf("after await_for(%s): %s", lsnN(w), diffViews(d.Views, e.wantViews(views...)))
	}
	final := converge(t, p, e.wantViews(views...))
	time.Sleep(300 * time.Millisecond) // the listener's last changes
	checkChanges(t, p, final.Views)
	p.close()
	checkDelivery(t, e, r)
}

func scenarioPlayerRestart(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 100, 1)
	addr, stop := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: "restart-" + c.name})
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	stop()
	w = e.fill(w, 50, 100, 2)
	addr2, _ := startPlayer(t, e, nil)
	r.setUpstream(addr2)
	e.fill(w, 120, 20, 3)
	converge(t, p, e.wantViews(views...))
	hs := r.helloes("restart-" + c.name)
	if len(hs) < 2 || hs[len(hs)-1].ResumeIndex == nil {
		t.Fatalf("the client did not resume after the player restart: %d hellos", len(hs))
	}
	p.close()
	checkDelivery(t, e, r)
}

// scenarioManyChannel: a client that subscribes as a channel of a SubscribeMany stream
// gets what a Subscribe stream gets: its snapshot, live transactions, and a resume after
// the player restarts; the recorder checks every channel frame with the delivery checker.
func scenarioManyChannel(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 100, 1)
	addr, stop := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: "many-" + c.name, Many: true})
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	w = e.fill(w, 50, 60, 2)
	converge(t, p, e.wantViews(views...))
	stop()
	w = e.fill(w, 80, 60, 3)
	addr2, _ := startPlayer(t, e, nil)
	r.setUpstream(addr2)
	e.fill(w, 120, 20, 4)
	final := converge(t, p, e.wantViews(views...))
	hs := r.helloes("many-" + c.name)
	if len(hs) < 2 || hs[len(hs)-1].ResumeIndex == nil {
		t.Fatalf("the client did not resume on a channel after the player restart: %d hellos", len(hs))
	}
	if r.manyStreams() == 0 || r.subscribeStreams() != 0 {
		t.Fatalf("the client opened %d SubscribeMany and %d Subscribe streams, want only SubscribeMany", r.manyStreams(), r.subscribeStreams())
	}
	time.Sleep(300 * time.Millisecond) // the listener's last changes
	checkChanges(t, p, final.Views)
	p.close()
	checkDelivery(t, e, r)
}

func scenarioKill9(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 100, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	cfg := driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: "kill9-" + c.name}
	p := c.start(t, cfg)
	p.next(time.Minute, "ready")
	w = e.fill(w, 80, 50, 2)
	p.kill9()
	w = e.fill(w, 100, 50, 3)
	p2 := c.start(t, cfg)
	p2.next(time.Minute, "ready")
	e.fill(w, 0, 10, 4)
	converge(t, p2, e.wantViews(views...))
	p2.close()
	checkDelivery(t, e, r)
}

// scenarioStateFile restarts a client that keeps a state file: after a close (which writes
// one) and after a kill -9 (the last periodic one), it resumes at the file's index without a
// snapshot, and the changes written while it was down reach it.
func scenarioStateFile(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 100, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	id := "state-" + c.name
	cfg := driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: id,
		StateDir: t.TempDir(), PersistMillis: 100}
	p := c.start(t, cfg)
	p.next(time.Minute, "ready")
	w = e.fill(w, 80, 50, 2)
	converge(t, p, e.wantViews(views...))
	p.close()
	w = e.fill(w, 100, 50, 3)
	p2 := c.start(t, cfg)
	ready := p2.next(time.Minute, "ready")
	checkResumed(t, r, id, "restart after close", 0)
	w = e.fill(w, 0, 20, 4)
	converge(t, p2, e.wantViews(views...))
	// Let a periodic write cover what was applied, then kill.
	time.Sleep(500 * time.Millisecond)
	p2.kill9()
	w = e.fill(w, 130, 30, 5)
	p3 := c.start(t, cfg)
	p3.next(time.Minute, "ready")
	checkResumed(t, r, id, "restart after kill -9", int64(ready.Applied))
	e.fill(w, 0, 10, 6)
	converge(t, p3, e.wantViews(views...))
	p3.close()
	checkDelivery(t, e, r)
}

// checkResumed fails the test unless target's last Hello resumed at an index of at least
// atLeast (from its state file) and the player sent it no snapshot since its first start.
func checkResumed(t *testing.T, r *recorder, target, what string, atLeast int64) {
	t.Helper()
	hs := r.helloes(target)
	h := hs[len(hs)-1]
	if h.ResumeIndex == nil || h.GetResumeIndex() < atLeast {
		t.Fatalf("%s: the client subscribed with resume index %v, want one from its state file (>= %d)", what, h.ResumeIndex, atLeast)
	}
	if n := r.snapshots(target); n != 1 {
		t.Fatalf("%s: %d snapshots sent to the client, want only the first start's", what, n)
	}
}

// TestStateFileAcrossClients hands one state directory from the Go client to the Java
// client and back: both write and read the same state file (schemas/README.md, "State
// files"), so each resumes from the other's file without a snapshot.
func TestStateFileAcrossClients(t *testing.T) {
	e := newEnv(t)
	w := e.fill(1, 0, 100, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	id := "state-across"
	cfg := driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: id,
		StateDir: t.TempDir(), PersistMillis: 3_600_000}
	goc, javac := goClient(t), javaClient(t)
	p := goc.start(t, cfg)
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	p.close() // the Go client writes the file
	for i, c := range []client{javac, goc} {
		w = e.fill(w, 90, 30, 2+i)
		p := c.start(t, cfg)
		p.next(time.Minute, "ready")
		checkResumed(t, r, id, "the "+c.name+" client started on the other client's file", 0)
		converge(t, p, e.wantViews(views...))
		p.close() // and writes it for the next one
	}
	checkDelivery(t, e, r)
}

func scenarioEpochCheck(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 60, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	id := "epoch-" + c.name
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: id})
	p.next(time.Minute, "ready")
	// A right count and hash: the client keeps its subscription.
	e.epochEnd("events", 0)
	w = e.fill(w, 60, 10, 1)
	converge(t, p, e.wantViews(views...))
	if n := len(r.helloes(id)); n != 1 {
		t.Fatalf("a matching epoch end made the client subscribe again (%d hellos)", n)
	}
	// A wrong hash: the client subscribes again for a snapshot (no resume index).
	e.epochEnd("markets", 1)
	e.fill(w, 0, 5, 2)
	deadline := time.Now().Add(time.Minute)
	for {
		hs := r.helloes(id)
		if len(hs) >= 2 {
			if hs[1].ResumeIndex != nil {
				t.Fatalf("after an epoch mismatch the client resumed at %d instead of asking for a snapshot", hs[1].GetResumeIndex())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client did not resync after an epoch hash mismatch")
		}
		time.Sleep(20 * time.Millisecond)
	}
	converge(t, p, e.wantViews(views...))
	p.close()
	checkDelivery(t, e, r)
}

func scenarioTombstoneHorizon(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 50, 1)
	short := func(cfg *player.Config) { cfg.DeleteRetention = time.Second }
	addr, stop := startPlayer(t, e, short)
	r := newRecorder(t, addr)
	id := "horizon-" + c.name
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: id})
	p.next(time.Minute, "ready")
	stop()
	var del []row
	for i := 0; i < 20; i++ {
		del = append(del, row{"events", fmt.Sprint(i), ""})
	}
	e.write(lsnN(w), del...)
	w = e.fill(w+1, 50, 10, 2)
	time.Sleep(2500 * time.Millisecond) // the records after the client's index age past the horizon
	addr2, _ := startPlayer(t, e, short)
	r.setUpstream(addr2)
	converge(t, p, e.wantViews(views...))
	if r.resyncCount(id) == 0 {
		t.Fatal("the player sent no ResyncRequired for a resume past the tombstone horizon")
	}
	_ = w
	p.close()
	checkDelivery(t, e, r)
}

func scenarioTLSToken(t *testing.T, c client) {
	e := newEnv(t)
	e.fill(1, 0, 40, 1)
	pki := testenv.NewPKI(t)
	cert, key := pki.ServerFiles(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("conformance=s3cret-conformance\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startPlayer(t, e, func(cfg *player.Config) {
		cfg.Insecure = false
		cfg.TLS = player.TLSConfig{CertFile: cert, KeyFile: key}
		cfg.Tokens = player.TokensConfig{File: tokens}
	})
	p := c.start(t, driverConfig{Addresses: []string{addr}, Stream: "s", Views: views, Token: "s3cret-conformance", CAFile: pki.CAFile})
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	p.close()
	testenv.NoSecrets(t, c.name+" driver", p.stderr.String(), "s3cret-conformance")
}

// scenarioMutualTLS: a player that requires client certificates serves a client that
// presents one signed by its CA, and not one that presents none.
func scenarioMutualTLS(t *testing.T, c client) {
	e := newEnv(t)
	e.fill(1, 0, 40, 1)
	pki := testenv.NewPKI(t)
	cert, key := pki.ServerFiles(t)
	addr, _ := startPlayer(t, e, func(cfg *player.Config) {
		cfg.Insecure = false
		cfg.TLS = player.TLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: pki.CAFile}
	})
	ccert, ckey := pki.ClientFiles(t, "conformance")
	p := c.start(t, driverConfig{Addresses: []string{addr}, Stream: "s", Views: views, CAFile: pki.CAFile,
		CertFile: ccert, KeyFile: pki.PKCS8(t, ckey)})
	p.next(time.Minute, "ready")
	converge(t, p, e.wantViews(views...))
	p.close()

	anon := c.start(t, driverConfig{Addresses: []string{addr}, Stream: "s", Views: views, CAFile: pki.CAFile, NoListener: true})
	time.Sleep(2 * time.Second)
	if d := anon.dump(); d.Ready || len(d.Views["events"]) > 0 {
		t.Fatalf("a client without a certificate was served: ready %v, %d events", d.Ready, len(d.Views["events"]))
	}
	anon.close()
}

// scenarioSelections: a client that selects rows of one view by a filter and holds one
// hash shard of another gets exactly those rows, on the snapshot and live (rows that
// start or stop passing included, inside their source transactions), checked by the
// delivery checker against a model of the selections written apart from the player's; a
// second client holding a column list stores only those columns, then changes its filter
// while it runs (reselect) and holds the new filter's rows, live changes included.
func scenarioSelections(t *testing.T, c client) {
	e := newEnv(t)
	w := e.fill(1, 0, 120, 1)
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	const shards, shard = 3, 1
	tennis := func(value []byte) bool {
		var row struct {
			Sport string `json:"sport"`
		}
		return json.Unmarshal(value, &row) == nil && row.Sport == "tennis"
	}
	r.setSelections(map[string]checker.Selection{
		"events":  func(rec checker.Record) bool { return tennis(rec.Value) },
		"markets": func(rec checker.Record) bool { return record.Shard([]byte(rec.Key), shards) == shard },
	})
	sels := map[string]driverSelection{"events": {Filter: `sport == "tennis"`}, "markets": {ShardIndex: shard, ShardCount: shards}}
	want := func() map[string]map[string]string {
		all := e.wantViews(views...)
		out := map[string]map[string]string{"events": {}, "markets": {}}
		for k, v := range all["events"] {
			if tennis([]byte(v)) {
				out["events"][k] = v
			}
		}
		for k, v := range all["markets"] {
			if record.Shard(append(record.KeyPrefix("markets"), k...), shards) == shard { // the record key
				out["markets"][k] = v
			}
		}
		return out
	}
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, Selections: sels})
	p.next(time.Minute, "ready")
	converge(t, p, want())
	// Live: events move in and out of the filter (a sport changed), in one transaction
	// with rows of the other view; deletes of rows that pass and of rows that do not.
	var moves []row
	for i := 0; i < 60; i++ {
		moves = append(moves, row{"events", fmt.Sprint(i), value(i, []string{"tennis", "football"}[i%2], 2)})
		if i%5 == 0 {
			moves = append(moves, row{"markets", fmt.Sprintf("%d|win", i), fmt.Sprintf(`{"event":%d,"odds":"9.5"}`, i)})
		}
	}
	e.write(lsnN(w), moves...)
	w++
	var del []row
	for i := 100; i < 110; i++ {
		del = append(del, row{"events", fmt.Sprint(i), ""}, row{"markets", fmt.Sprintf("%d|win", i), ""})
	}
	e.write(lsnN(w), del...)
	final := converge(t, p, want())
	if n := len(final.Views["events"]); n == 0 || n == len(e.wantViews("events")["events"]) {
		t.Fatalf("the client holds %d events: the filter selected nothing, or everything", n)
	}
	p.close()
	checkDelivery(t, e, r)

	// Columns: the rows cut to them, in the view's column order.
	cols := c.start(t, driverConfig{Addresses: []string{addr}, Stream: "s", Views: []string{"events"}, NoListener: true,
		Selections: map[string]driverSelection{"events": {Filter: `sport == "tennis"`, Columns: []string{"sport", "id"}}}})
	cols.next(time.Minute, "ready")
	cut := func(sport string) map[string]map[string]string {
		out := map[string]string{}
		for k, v := range e.wantViews("events")["events"] {
			var row struct {
				ID    int    `json:"id"`
				Sport string `json:"sport"`
			}
			if err := json.Unmarshal([]byte(v), &row); err != nil {
				t.Fatal(err)
			}
			if row.Sport == sport {
				out[k] = fmt.Sprintf(`{"id":%d,"sport":%q}`, row.ID, row.Sport)
			}
		}
		return map[string]map[string]string{"events": out}
	}
	converge(t, cols, cut("tennis"))

	// A change of selection at run time: a resubscription without a restart. The view
	// becomes the new filter's rows, and changes after it follow the new filter (an event
	// moving into football arrives, one moving out leaves).
	cols.send(`{"cmd":"reselect","view":"events","selection":{"filter":"sport == \"football\"","columns":["sport","id"]}}`)
	cols.next(time.Minute, "reselected")
	converge(t, cols, cut("football"))
	w++
	e.write(lsnN(w), row{"events", "0", value(0, "football", 3)}, row{"events", "1", value(1, "tennis", 3)})
	if got := converge(t, cols, cut("football")); got.Views["events"]["0"] == "" || got.Views["events"]["1"] != "" {
		t.Fatalf("after the reselection, event 0 moved into football and 1 out of it: %v", got.Views["events"])
	}
	cols.close()
}

func scenarioRefusedView(t *testing.T, c client) {
	e := newEnv(t)
	e.fill(1, 0, 10, 1)
	addr, _ := startPlayer(t, e, nil)
	p := c.start(t, driverConfig{Addresses: []string{addr}, Stream: "s", Views: []string{"events", "nosuch_view"}})
	ev := p.next(time.Minute, "stopped", "ready")
	if ev.Event != "stopped" {
		t.Fatal("a client subscribed to a view the stream does not carry became ready")
	}
	if !strings.Contains(ev.Error, "nosuch_view") {
		t.Fatalf("the refusal does not name the view: %s", ev.Error)
	}
}

// scenarioPostgres runs the whole pipeline: PostgreSQL → distributor (WAL capture) →
// Kafka → player → the client; after the writes, a wait for the last commit's WAL
// position must show exactly what the views' SQL returns.
func scenarioPostgres(t *testing.T, c client) {
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE sports (name text PRIMARY KEY, kind text NOT NULL);
		CREATE TABLE events (id int PRIMARY KEY, sport text NOT NULL REFERENCES sports, name text NOT NULL, starts timestamptz, price numeric);
		INSERT INTO sports VALUES ('football', 'team'), ('tennis', 'solo');
		INSERT INTO events SELECT i, CASE WHEN i % 2 = 0 THEN 'football' ELSE 'tennis' END, 'event ' || i,
			'2026-12-01T10:00:00Z'::timestamptz + i * interval '1 minute', i * 1.25 FROM generate_series(1, 300) i`); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	sqls := map[string]string{
		"events":  "SELECT id, sport, name, starts, price FROM events",
		"markets": "SELECT e.id, e.name, s.kind FROM events e JOIN sports s ON s.name = e.sport",
	}
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: e.brokers, ClientID: "conformance"}},
		Streams: []distributor.StreamConfig{{Topic: e.topic, PositionInterval: 20 * time.Millisecond, Views: []distributor.ViewConfig{
			{Name: "events", SQL: sqls["events"], Key: []string{"id"}},
			{Name: "markets", SQL: sqls["markets"], Key: []string{"id"}},
		}}},
	}
	d, err := distributor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancelRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	var once sync.Once
	stopDistributor := func() {
		once.Do(func() {
			cancelRun()
			if err := <-done; err != nil {
				t.Errorf("distributor: %v", err)
			}
		})
	}
	t.Cleanup(stopDistributor)
	// Creating the replication slot waits for every transaction open on the server, other
	// tests' included: on a shared server that can take a while.
	rctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := d.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	addr, _ := startPlayer(t, e, nil)
	r := newRecorder(t, addr)
	id := "postgres-" + c.name
	p := c.start(t, driverConfig{Addresses: []string{r.addr}, Stream: "s", Views: views, InstanceID: id})
	p.next(time.Minute, "ready")
	// Transactions while the client is live: updates, deletes, inserts, a parent rename.
	for i := 0; i < 20; i++ {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stmts := []string{
			fmt.Sprintf("UPDATE events SET name = 'renamed %d', price = price + 0.01 WHERE id %% 20 = %d", i, i),
			fmt.Sprintf("DELETE FROM events WHERE id = %d", 280+i),
			fmt.Sprintf("INSERT INTO events VALUES (%d, 'tennis', 'new %d', NULL, NULL)", 1000+i, i),
		}
		if i == 10 {
			stmts = append(stmts, "UPDATE sports SET kind = 'teams' WHERE name = 'football'")
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var lsn string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	p.send(fmt.Sprintf(`{"cmd":"await_for","lsn":%q}`, lsn))
	p.next(2*time.Minute, "reached")
	got := p.dump()
	for view, sql := range sqls {
		want := map[string]any{}
		rows, err := pool.Query(ctx, "SELECT id::text, to_jsonb(v)::text FROM ("+sql+") v")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, js string
			if err := rows.Scan(&id, &js); err != nil {
				t.Fatal(err)
			}
			want[id] = decodeJSON(t, js)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		have := map[string]any{}
		for k, js := range got.Views[view] {
			have[k] = decodeJSON(t, js)
		}
		if len(have) != len(want) {
			t.Fatalf("view %s after await_for(%s): %d rows, PostgreSQL has %d", view, lsn, len(have), len(want))
		}
		for k, w := range want {
			if !reflect.DeepEqual(normalize(have[k]), normalize(w)) {
				t.Fatalf("view %s key %s after await_for(%s): the client holds %v, PostgreSQL %v", view, k, lsn, have[k], w)
			}
		}
	}
	// The distributor writes position records while it runs: stop it, and let the client
	// receive the rest of the topic, so that the checker's "reliable" has an end.
	stopDistributor()
	drain(t, e, p)
	p.close()
	checkDelivery(t, e, r)
}

// drain waits until the client's applied index reaches the topic's last record.
func drain(t *testing.T, e *env, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	truth, err := checker.ReadTopic(ctx, e.brokers, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(truth) == 0 {
		return
	}
	last := truth[len(truth)-1].Index
	deadline := time.Now().Add(time.Minute)
	for p.dump().Applied < last {
		if time.Now().After(deadline) {
			t.Fatalf("the client did not reach the topic's last index %d", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return v
}

// normalize maps the record format's spellings and to_jsonb's to one: numeric is a string
// in the record format and a number in jsonb; timestamptz is RFC 3339 in UTC in the record
// format and PostgreSQL's text with an offset in jsonb.
func normalize(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		switch y := x.(type) {
		case json.Number:
			out[k] = y.String()
		case string:
			if ts, err := time.Parse(time.RFC3339Nano, y); err == nil {
				out[k] = ts.UTC().Format(time.RFC3339Nano)
			} else {
				out[k] = y
			}
		default:
			out[k] = x
		}
	}
	return out
}
