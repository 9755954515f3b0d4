package player

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// env is one integration test's world: a fresh topic, a producer and a delivery checker.
type env struct {
	t       *testing.T
	brokers []string
	topic   string
	prod    sarama.SyncProducer
	chk     *checker.Checker
	mu      sync.Mutex
	last    int64  // offset of the last produced record
	lsn     uint64 // source position of the last position record (produceTxns)
}

func newEnv(t *testing.T, configs map[string]string) *env {
	t.Helper()
	brokers := testenv.KafkaBrokers(t)
	if configs == nil {
		configs = map[string]string{"cleanup.policy": "compact"}
	}
	topic := testenv.NewTopic(t, "player", configs)
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("player-test"))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	t.Cleanup(func() { _ = prod.Close() })
	return &env{t: t, brokers: brokers, topic: topic, prod: prod, chk: checker.New(), last: -1}
}

// produce writes n records over views (rows over a small key space, with tombstones and
// poll control records mixed in) and returns the offset of the last one.
func (e *env) produce(n int, views []string, valueSize int, rnd *rand.Rand) int64 {
	e.t.Helper()
	msgs := make([]*sarama.ProducerMessage, 0, 100)
	flush := func() {
		if len(msgs) == 0 {
			return
		}
		if err := e.prod.SendMessages(msgs); err != nil {
			e.t.Errorf("produce: %v", err)
		}
		e.mu.Lock()
		for _, m := range msgs {
			e.last = max(e.last, m.Offset)
		}
		e.mu.Unlock()
		msgs = msgs[:0]
	}
	pad := make([]byte, valueSize)
	for i := range pad {
		pad[i] = 'x'
	}
	for range n {
		v := views[rnd.IntN(len(views))]
		meta := record.Meta{View: v, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
		k := strconv.Itoa(rnd.IntN(50))
		key := record.EncodeKey(v, k)
		var value []byte
		switch r := rnd.IntN(20); {
		case r == 0:
			meta.Kind = record.KindPoll
			key = record.ControlKey(v, record.KindPoll)
			value = []byte(`{"watermark":"1","source_lsn":"0/1","source_time":"2026-11-29T00:00:00Z"}`)
		case r < 3:
			value = nil // tombstone
		default:
			value = fmt.Appendf(nil, `{"id":%q,"pad":%q}`, k, pad)
		}
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, key, value, meta))
		if len(msgs) == cap(msgs) {
			flush()
		}
	}
	flush()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// produceTxns writes n source transactions over views as the distributor's WAL capture
// does: each is 1 to 12 rows (tombstones mixed in) marked sc-txn, then a position record
// with a growing source position; now and then a row without sc-txn between them. It
// returns the offset of the last record.
func (e *env) produceTxns(n int, views []string, rnd *rand.Rand) int64 {
	e.t.Helper()
	var msgs []*sarama.ProducerMessage
	for range n {
		if rnd.IntN(8) == 0 {
			v := views[rnd.IntN(len(views))]
			msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(v, strconv.Itoa(rnd.IntN(50))),
				[]byte(`{"loose":1}`), record.Meta{View: v, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now()}))
		}
		for range 1 + rnd.IntN(12) {
			v := views[rnd.IntN(len(views))]
			var value []byte
			if rnd.IntN(6) != 0 {
				value = []byte(`{"txn":1}`)
			}
			msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.EncodeKey(v, strconv.Itoa(rnd.IntN(50))),
				value, record.Meta{View: v, Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), Txn: true}))
		}
		e.lsn += 1 + uint64(rnd.IntN(1000))
		lsn := e.lsnText()
		msgs = append(msgs, recordsarama.ProducerMessage(e.topic, record.PositionKey(),
			(&record.Position{LSN: lsn, Time: time.Now()}).Marshal(),
			record.Meta{Kind: record.KindPosition, SourceTime: time.Now(), SourceLSN: lsn}))
	}
	if err := e.prod.SendMessages(msgs); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range msgs {
		e.last = max(e.last, m.Offset)
	}
	return e.last
}

// lsnText is the source position of the last position record produceTxns wrote.
func (e *env) lsnText() string { return fmt.Sprintf("%X/%X", e.lsn>>32, uint32(e.lsn)) }

func (e *env) lastOffset() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// check reads the topic and runs the delivery checker over everything recorded.
func (e *env) check() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	truth, err := checker.ReadTopic(ctx, e.brokers, e.topic)
	if err != nil {
		e.t.Fatalf("read topic: %v", err)
	}
	if err := e.chk.Check(truth); err != nil {
		e.t.Fatalf("delivery checker: %v", err)
	}
}

// testPlayer is an in-process player on a loopback listener.
type testPlayer struct {
	p    *Player
	addr string
	done chan struct{}
}

// waitMain waits until the main fetcher of tp's stream "s" has read up to index. A test
// that deletes records (DeleteRecords) calls it first: records deleted before the main
// fetcher read them leave it out of range, and the stream goes unavailable (its targets
// end) instead of the target's recovery meeting the new log start.
func (tp *testPlayer) waitMain(t *testing.T, index int64) {
	t.Helper()
	s := tp.p.streams["s"]
	waitFor(t, 60*time.Second, fmt.Sprintf("the main fetcher at %d", index), func() bool { return s.current.Load() >= index })
}

func startPlayer(t *testing.T, e *env, mod func(*Config)) *testPlayer {
	t.Helper()
	return startPlayerTB(t, e, mod)
}

func startPlayerB(b *testing.B, e *env) *testPlayer { return startPlayerTB(b, e, nil) }

func nopChecker() *checker.Checker { return checker.New() }

// testAckTimeout is the test players' ack time-out. Tests stall targets on purpose for
// whole phases that may take up to 90 s on a slow machine (waitFor's bounds) and expect
// them to recover in place: a time-out shorter than a phase suspends them and fails the
// test for the machine's slowness. Tests of the time-out itself set their own.
const testAckTimeout = 3 * time.Minute

func startPlayerTB(t testing.TB, e *env, mod func(*Config), opts ...Option) *testPlayer {
	t.Helper()
	cfg := Config{
		Insecure:         true,
		Kafka:            kafkaconn.Config{Brokers: e.brokers},
		Streams:          []StreamConfig{{Name: "s", Topic: e.topic}},
		ProgressInterval: 50 * time.Millisecond,
		AckTimeout:       testAckTimeout,
		ShutdownGrace:    2 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &testPlayer{p: p, addr: lis.Addr().String(), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := p.Run(context.Background()); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := p.Serve(lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	go func() { wg.Wait(); close(tp.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	t.Cleanup(tp.stop)
	return tp
}

func (tp *testPlayer) stop() {
	_ = tp.p.Close()
	<-tp.done
}

// client is a test target: it applies what it receives (the applied index only), acks
// it, records everything in the checker, and resumes from its applied index.
type client struct {
	id    string
	views []string
	chk   *checker.Checker

	mu       sync.Mutex
	applied  int64
	hasState bool
	resyncs  []statecastv1.ResyncRequired_Reason
	batch    int // max batch entries hint
	stream   string
	window   int32                        // if > 0: the gRPC stream/conn window (no BDP growth), to stall for real
	dial     []grpc.DialOption            // when set: the transport (TLS) and credentials, instead of plaintext
	service  string                       // Hello.service
	sels     []*statecastv1.Selection     // Hello.selections
	model    map[string]checker.Selection // the checker's model of sels, by view
	frames   int
	maxHead  int64    // highest SubscribeResponse.head_index seen
	topic    []byte   // the topic ID of the applied index (sent back in Hello.topic_id)
	topics   [][]byte // every distinct topic ID received, in order
	headErrs []string // messages whose head_index was below an index they carried
	// Position entries received live and in snapshots; batches of the full entry count
	// that end with the start of a source transaction after a position entry (the player
	// cuts those after the position entry).
	positions, snapPositions int
	rowsGot, tombsGot        int // row entries received (live and in snapshots), tombstones among them
	// entryCheck, when set, checks every entry received ("" fine, else why not: kept in
	// entryErrs, at most 5).
	entryCheck func(*statecastv1.Entry) string
	entryErrs  []string
	cutErrs    []string
	// many, when set: sessions are channels of a SubscribeMany stream it shares with other
	// clients, instead of Subscribe streams of their own.
	many *manyTestConn
}

// subStream is what a session uses of its stream: a Subscribe stream or a channel.
type subStream interface {
	Send(*statecastv1.SubscribeRequest) error
	Recv() (*statecastv1.SubscribeResponse, error)
}

func newClient(id string, chk *checker.Checker, views ...string) *client {
	return &client{id: id, views: views, chk: chk, applied: -1, batch: 8, stream: "s"}
}

func (c *client) Applied() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied
}

func kindString(k statecastv1.Kind) string {
	switch k {
	case statecastv1.Kind_KIND_EPOCH_BEGIN:
		return checker.KindEpochBegin
	case statecastv1.Kind_KIND_EPOCH_END:
		return checker.KindEpochEnd
	case statecastv1.Kind_KIND_POLL:
		return checker.KindPoll
	case statecastv1.Kind_KIND_POSITION:
		return checker.KindPosition
	}
	return checker.KindRow
}

// session runs one Subscribe stream against addr until ctx ends, the stream fails, or
// stopAfter frames were received (0 = no limit). A lost snapshot is forgotten. pause, if
// not nil, is called before each Recv (to stall the client).
func (c *client) session(ctx context.Context, addr string, stopAfter int, pause func()) error {
	dopts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if c.dial != nil {
		dopts = c.dial
	}
	if c.window > 0 {
		dopts = append(dopts, grpc.WithInitialWindowSize(c.window), grpc.WithInitialConnWindowSize(c.window))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var st subStream
	if c.many != nil {
		mc, err := c.many.open(ctx, addr)
		if err != nil {
			return err
		}
		defer mc.close()
		st = mc
	} else {
		conn, err := grpc.NewClient(addr, dopts...)
		if err != nil {
			return err
		}
		defer conn.Close()
		sub, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
		if err != nil {
			return err
		}
		st = sub
	}
	c.mu.Lock()
	hello := &statecastv1.Hello{ClientId: c.id, Service: c.service, Stream: c.stream, Views: c.views, MaxBatchEntries: uint32(c.batch), Selections: c.sels}
	var resume *int64
	if c.hasState {
		r := c.applied
		resume = &r
		hello.ResumeIndex = &r
		hello.TopicId = c.topic
	}
	c.mu.Unlock()
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return err
	}
	if c.model != nil {
		c.chk.HelloSelect(c.id, c.views, resume, c.model)
	} else {
		c.chk.Hello(c.id, c.views, resume)
	}
	ack := func(i int64) error {
		return st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: i}}})
	}
	inSnap := false
	for n := 0; stopAfter == 0 || n < stopAfter; n++ {
		if pause != nil {
			pause()
		}
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		c.mu.Lock()
		c.frames++
		c.maxHead = max(c.maxHead, resp.GetHeadIndex())
		if id := resp.GetTopicId(); len(id) > 0 {
			c.topic = id
			if n := len(c.topics); n == 0 || !bytes.Equal(c.topics[n-1], id) {
				c.topics = append(c.topics, id)
			}
		}
		if h := resp.GetHeadIndex(); !inSnap && len(resp.GetBatch().GetEntries()) > 0 {
			if last := resp.GetBatch().GetEntries()[len(resp.GetBatch().GetEntries())-1].GetIndex(); h < last && len(c.headErrs) < 5 {
				c.headErrs = append(c.headErrs, fmt.Sprintf("batch up to %d with head_index %d", last, h))
			}
		}
		if p := resp.GetProgress(); p != nil && resp.GetHeadIndex() < p.GetIndex() && len(c.headErrs) < 5 {
			c.headErrs = append(c.headErrs, fmt.Sprintf("progress %d with head_index %d", p.GetIndex(), resp.GetHeadIndex()))
		}
		var ackIdx int64 = -2
		switch m := resp.Msg.(type) {
		case *statecastv1.SubscribeResponse_Batch:
			es := make([]checker.Entry, len(m.Batch.Entries))
			lastPos, txnAfter := -1, false
			for i, en := range m.Batch.Entries {
				es[i] = checker.Entry{Index: en.Index, Key: string(en.Key), View: en.View, Kind: kindString(en.Kind), Tombstone: en.Tombstone}
				if c.entryCheck != nil && len(c.entryErrs) < 5 {
					if why := c.entryCheck(en); why != "" {
						c.entryErrs = append(c.entryErrs, fmt.Sprintf("entry %d: %s", en.Index, why))
					}
				}
				if en.Kind == statecastv1.Kind_KIND_ROW {
					c.rowsGot++
					if en.Tombstone {
						c.tombsGot++
					}
				}
				switch {
				case en.Kind == statecastv1.Kind_KIND_POSITION && inSnap:
					c.snapPositions++
					lastPos, txnAfter = i, false
				case en.Kind == statecastv1.Kind_KIND_POSITION:
					c.positions++
					lastPos, txnAfter = i, false
				case en.Txn && lastPos >= 0:
					txnAfter = true
				}
			}
			if len(es) == c.batch && txnAfter && len(c.cutErrs) < 5 {
				c.cutErrs = append(c.cutErrs, fmt.Sprintf("full batch %d..%d: position entry at %d followed by a transaction's entries",
					es[0].Index, es[len(es)-1].Index, es[lastPos].Index))
			}
			c.chk.Batch(c.id, es)
			if !inSnap && len(es) > 0 {
				c.applied = es[len(es)-1].Index
				ackIdx = c.applied
			}
		case *statecastv1.SubscribeResponse_Progress:
			c.chk.Progress(c.id, m.Progress.Index)
			if m.Progress.Index > c.applied {
				c.applied = m.Progress.Index
			}
			ackIdx = c.applied
		case *statecastv1.SubscribeResponse_SnapshotBegin:
			c.chk.SnapshotBegin(c.id, m.SnapshotBegin.Index, m.SnapshotBegin.Views)
			inSnap = true
		case *statecastv1.SubscribeResponse_SnapshotEnd:
			c.chk.SnapshotEnd(c.id, m.SnapshotEnd.Index)
			inSnap = false
			c.applied, c.hasState = m.SnapshotEnd.Index, true
			ackIdx = c.applied
		case *statecastv1.SubscribeResponse_ResyncRequired:
			c.chk.Resync(c.id, m.ResyncRequired.Reason.String())
			c.resyncs = append(c.resyncs, m.ResyncRequired.Reason)
		}
		c.mu.Unlock()
		if ackIdx >= -1 {
			if err := ack(ackIdx); err != nil {
				return nil
			}
		}
	}
	return nil
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }

// waitFor polls cond until it holds or the timeout passes (then the test fails now).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// poll polls cond until it holds (true) or the timeout passes (false); usable from any
// goroutine.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// sessionUntil runs one session of c until cond holds (or the timeout passes: error).
func sessionUntil(t *testing.T, c *client, addr string, timeout time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ok := make(chan bool, 1)
	go func() {
		ok <- poll(timeout, cond)
		cancel()
	}()
	if err := c.session(ctx, addr, 0, nil); err != nil {
		t.Errorf("%s: session: %v", c.id, err)
	}
	if !<-ok {
		t.Errorf("%s: condition not reached within %s", c.id, timeout)
	}
}
