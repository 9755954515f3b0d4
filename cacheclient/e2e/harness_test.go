package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gojson "github.com/goccy/go-json"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

type event struct {
	ID    int64  `json:"id"`
	Sport string `json:"sport"`
	Name  string `json:"name"`
}

// decodeEvent is the service's decoder, used by the cache and by the replay baseline
// alike: github.com/goccy/go-json (faster than encoding/json, same results;
// UnmarshalNoEscape because &e does not outlive the call).
func decodeEvent(_ string, b []byte) (event, error) {
	var e event
	err := gojson.UnmarshalNoEscape(b, &e)
	return e, err
}

// kafkaEnv is a fresh topic with a producer that writes records the way the distributor
// does (schemas/README.md), and keeps the expected content of each view.
type kafkaEnv struct {
	t       *testing.T
	brokers []string
	topic   string
	prod    sarama.SyncProducer

	mu   sync.Mutex
	want map[string]map[string]string // view -> key text -> value
}

func newKafkaEnv(t *testing.T) *kafkaEnv {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "cacheclient", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("cacheclient-e2e"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	return &kafkaEnv{t: t, brokers: brokers, topic: topic, prod: prod, want: map[string]map[string]string{}}
}

// put writes rows (value "" = tombstone) of one view and returns the last offset.
func (e *kafkaEnv) put(view string, rows ...[2]string) int64 {
	e.t.Helper()
	var msgs []*sarama.ProducerMessage
	e.mu.Lock()
	if e.want[view] == nil {
		e.want[view] = map[string]string{}
	}
	for _, r := range rows {
		meta := record.Meta{View: view, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
		var value []byte
		if r[1] != "" {
			value = []byte(r[1])
			e.want[view][r[0]] = r[1]
		} else {
			delete(e.want[view], r[0])
		}
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(view, r[0]), value, meta))
	}
	e.mu.Unlock()
	if err := e.prod.SendMessages(msgs); err != nil {
		e.t.Fatal(err)
	}
	return msgs[len(msgs)-1].Offset
}

// txnRow is one row of a source transaction: view, key text, value ("" = tombstone).
type txnRow struct{ view, key, value string }

// putTxn writes a source transaction as the distributor's WAL capture does: its rows
// marked sc-txn, then, when lsn is not empty, the position record that ends it ("-" for a
// position record without a source position, as polling writes). It returns the offset of
// the last record.
func (e *kafkaEnv) putTxn(lsn string, rows ...txnRow) int64 {
	e.t.Helper()
	var msgs []*sarama.ProducerMessage
	e.mu.Lock()
	for _, r := range rows {
		if e.want[r.view] == nil {
			e.want[r.view] = map[string]string{}
		}
		meta := record.Meta{View: r.view, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), Txn: true}
		var value []byte
		if r.value != "" {
			value = []byte(r.value)
			e.want[r.view][r.key] = r.value
		} else {
			delete(e.want[r.view], r.key)
		}
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(r.view, r.key), value, meta))
	}
	e.mu.Unlock()
	if lsn != "" {
		pos := &record.Position{Time: time.Now()}
		if lsn != "-" {
			pos.LSN = lsn
		}
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.PositionKey(), pos.Marshal(),
			record.Meta{Kind: record.KindPosition, SourceTime: pos.Time, SourceLSN: pos.LSN}))
	}
	if err := e.prod.SendMessages(msgs); err != nil {
		e.t.Fatal(err)
	}
	return msgs[len(msgs)-1].Offset
}

// epochEnd writes an epoch-end record for view describing what put wrote (rows and hash),
// optionally corrupted by delta.
func (e *kafkaEnv) epochEnd(view string, delta uint64) int64 {
	e.t.Helper()
	e.mu.Lock()
	var h record.EpochHash
	for k, v := range e.want[view] {
		h.Add(record.RowHash(record.EncodeKey(view, k), []byte(v)))
	}
	e.mu.Unlock()
	end := &record.EpochEnd{Epoch: 1, Rows: h.Rows(), Hash: h.Sum() + delta, SourceLSN: "0/1"}
	meta := record.Meta{View: view, Kind: record.KindEpochEnd, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	msg := recordsarama.ProducerMessage(e.topic, record.ControlKey(view, record.KindEpochEnd), end.Marshal(), meta)
	if _, off, err := e.prod.SendMessage(msg); err != nil {
		e.t.Fatal(err)
	} else {
		return off
	}
	return -1
}

func ev(id int, sport string) string {
	return fmt.Sprintf(`{"id":%d,"sport":%q,"name":"event %d"}`, id, sport, id)
}

// startPlayer runs an in-process player on a loopback listener until the test ends or
// stop is called.
func startPlayer(t *testing.T, e *kafkaEnv) (addr string, stop func()) { return startPlayerB(t, e) }

func startPlayerB(t testing.TB, e *kafkaEnv) (addr string, stop func()) {
	return startPlayerWith(t, e, nil)
}

// startPlayerWith is startPlayer with the config changed by mod first.
func startPlayerWith(t testing.TB, e *kafkaEnv, mod func(*player.Config)) (addr string, stop func()) {
	t.Helper()
	_, addr, stop = startPlayerP(t, e, mod)
	return addr, stop
}

// startPlayerP is startPlayerWith returning the player too (its Status).
func startPlayerP(t testing.TB, e *kafkaEnv, mod func(*player.Config)) (*player.Player, string, func()) {
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
	go func() { defer wg.Done(); p.Run(context.Background()) }()
	go func() { defer wg.Done(); p.Serve(lis) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { p.Close(); wg.Wait() }) }
	t.Cleanup(stop)
	return p, lis.Addr().String(), stop
}

// counting records what the client received through its hooks.
type counting struct {
	mu        sync.Mutex
	snapshots int
	snapRows  int
	entries   int
	connects  []bool // resumed?
}

func (c *counting) hooks() cacheclient.Hooks {
	return cacheclient.Hooks{
		OnSnapshot:     func(_ int64, rows int) { c.mu.Lock(); c.snapshots++; c.snapRows += rows; c.mu.Unlock() },
		OnBatchApplied: func(n int, _ int64, _ time.Duration) { c.mu.Lock(); c.entries += n; c.mu.Unlock() },
		OnConnect:      func(_ string, resumed bool) { c.mu.Lock(); c.connects = append(c.connects, resumed); c.mu.Unlock() },
	}
}

func newClient(t *testing.T, addrs []string, stateDir string, h cacheclient.Hooks) (*cacheclient.Client, *cacheclient.View[event]) {
	t.Helper()
	c, err := cacheclient.New(cacheclient.Config{
		Addresses: addrs, Stream: "s", Service: t.Name(), StateDir: stateDir,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, ReadyIdle: 300 * time.Millisecond,
	}, cacheclient.WithHooks(h))
	if err != nil {
		t.Fatal(err)
	}
	v, err := cacheclient.Register(c, "events", decodeEvent)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddIndex("sport", func(e event) []string { return []string{e.Sport} }); err != nil {
		t.Fatal(err)
	}
	return c, v
}

func waitReady(t *testing.T, c *cacheclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// equalView reports whether the view holds exactly want (compared on decoded objects).
func equalView(v *cacheclient.View[event], want map[string]string) bool {
	if v.Len() != len(want) {
		return false
	}
	for k, raw := range want {
		w, _ := decodeEvent(k, []byte(raw))
		if got, ok := v.Get(k); !ok || got != w {
			return false
		}
	}
	return true
}

func (e *kafkaEnv) wantOf(view string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for k, v := range e.want[view] {
		out[k] = v
	}
	return out
}
