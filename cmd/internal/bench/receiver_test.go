package bench

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// scriptedPlayer is a fake player: it answers each Subscribe with the frames of script,
// collects the acks, and ends the stream once it has want acks.
type scriptedPlayer struct {
	statecastv1.UnimplementedPlayerServer
	script []*statecastv1.SubscribeResponse
	want   int

	mu    sync.Mutex
	hello *statecastv1.Hello
	acks  []int64
}

func (s *scriptedPlayer) Subscribe(st statecastv1.Player_SubscribeServer) error {
	req, err := st.Recv()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.hello = req.GetHello()
	s.mu.Unlock()
	for _, m := range s.script {
		if err := st.Send(m); err != nil {
			return err
		}
	}
	for range s.want {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.acks = append(s.acks, req.GetAck().GetIndex())
		s.mu.Unlock()
	}
	return nil // the receiver sees io.EOF
}

// serve runs srv on loopback and returns a client connected to it.
func serve(t *testing.T, srv statecastv1.PlayerServer) statecastv1.PlayerClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	statecastv1.RegisterPlayerServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	conns, err := dial(lis.Addr().String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conns[0].Close()
		g.Stop()
	})
	return statecastv1.NewPlayerClient(conns[0])
}

func batch(entries ...*statecastv1.Entry) *statecastv1.SubscribeResponse {
	return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: entries}}}
}

func TestReceiverAppliesAndAcks(t *testing.T) {
	stamp := time.Now().Add(-time.Second)
	entry := func(i int64) *statecastv1.Entry {
		return &statecastv1.Entry{Index: i, Key: []byte("v|1"), Value: Payload(64, stamp), View: "v", Kind: statecastv1.Kind_KIND_ROW}
	}
	fp := &scriptedPlayer{want: 4, script: []*statecastv1.SubscribeResponse{
		batch(entry(3), entry(5)),
		{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 7}}},
		{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 8}}}, // not acked
		batch(entry(9)),
		{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 12}}},
	}}
	cli := serve(t, fp)
	var frames int
	r := &Receiver{ID: "t0", Frames: func(*statecastv1.SubscribeResponse) { frames++ }}
	hello := &statecastv1.Hello{ClientId: "t0", Stream: "s", ResumeIndex: proto.Int64(2)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Run(ctx, cli, hello); err != nil {
		t.Fatalf("Run: %v", err)
	}

	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.hello.GetClientId() != "t0" || fp.hello.GetResumeIndex() != 2 {
		t.Errorf("hello = %v", fp.hello)
	}
	if want := []int64{5, 7, 9, 12}; !slices.Equal(fp.acks, want) {
		t.Errorf("acks = %v, want %v (cumulative, one per frame that carries an index)", fp.acks, want)
	}
	if frames != 5 {
		t.Errorf("frames hook saw %d frames, want 5", frames)
	}
	got := r.Deliveries()
	var idx []int64
	for _, d := range got {
		idx = append(idx, d.Index)
		if d.Stamp != stamp.UnixNano() {
			t.Errorf("delivery %d: stamp %d, want %d", d.Index, d.Stamp, stamp.UnixNano())
		}
		if d.Applied < d.Stamp {
			t.Errorf("delivery %d applied before it was stamped", d.Index)
		}
	}
	if !slices.Equal(idx, []int64{3, 5, 9}) || r.Count() != 3 {
		t.Errorf("delivered %v (count %d), want [3 5 9]", idx, r.Count())
	}
	if pf := PerFrame([]*Receiver{r}); pf != 1.5 {
		t.Errorf("PerFrame = %v, want 1.5 (3 entries in 2 batches)", pf)
	}
	if !AllHave([]*Receiver{r}, 3) || AllHave([]*Receiver{r}, 4) {
		t.Error("AllHave disagrees with the count of 3")
	}
}

func TestReceiverStalledNeverReads(t *testing.T) {
	fp := &scriptedPlayer{want: 1, script: []*statecastv1.SubscribeResponse{batch(&statecastv1.Entry{Index: 1})}}
	cli := serve(t, fp)
	r := &Receiver{ID: "slow", Stalled: true}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := r.Run(ctx, cli, &statecastv1.Hello{ClientId: "slow"}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.hello.GetClientId() != "slow" || len(fp.acks) != 0 || r.Count() != 0 {
		t.Errorf("stalled receiver: hello %v, acks %v, count %d", fp.hello, fp.acks, r.Count())
	}
	if !AllHave([]*Receiver{r}, 100) {
		t.Error("AllHave counts a stalled receiver")
	}
}

func TestLatenciesAndSpans(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	a, b := &Receiver{}, &Receiver{}
	a.record(Delivery{Index: 0, Stamp: ms(0), Applied: ms(100)}) // warm-up
	a.record(Delivery{Index: 1, Stamp: ms(10), Applied: ms(12)})
	b.record(Delivery{Index: 1, Stamp: ms(10), Applied: ms(15)})
	b.record(Delivery{Index: 2, Stamp: ms(20), Applied: ms(21)})
	acks := &AckLog{at: map[int64]time.Time{1: time.Unix(0, ms(11))}}

	st, ak, missing := Latencies([]*Receiver{a, b}, 1, acks)
	if want := []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, time.Millisecond}; !slices.Equal(st, want) {
		t.Errorf("stamped = %v, want %v", st, want)
	}
	if want := []time.Duration{time.Millisecond, 4 * time.Millisecond}; !slices.Equal(ak, want) || missing != 1 {
		t.Errorf("acked = %v (missing %d), want %v (missing 1: index 2)", ak, missing, want)
	}
	if st, ak, _ := Latencies([]*Receiver{a}, 0, nil); len(st) != 2 || ak != nil {
		t.Errorf("from 0 without acks: %v, %v", st, ak)
	}

	spans := DispatchSpans([]*Receiver{a, b}, map[int64]int64{0: ms(0), 1: ms(11)}, 1)
	if want := []time.Duration{time.Millisecond, 4 * time.Millisecond}; !slices.Equal(spans, want) {
		t.Errorf("dispatch spans = %v, want %v (index 2 has no dispatch time)", spans, want)
	}
}
