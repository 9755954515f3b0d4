package conformance

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/internal/checker"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// recorder is a plaintext gRPC proxy in front of a player: it forwards every Subscribe
// stream to the player's current address (set again after a player restart) and records
// each frame in a delivery checker, as the client behind it saw them.
type recorder struct {
	statecastv1.UnimplementedPlayerServer
	check *checker.Checker
	addr  string

	mu       sync.Mutex
	upstream string
	hellos   map[string][]*statecastv1.Hello
	resyncs  map[string]int
	snaps    map[string]int // snapshots begun, by target
	// sels, when set, are the checker's models of the selections of a client that sends
	// some (setSelections).
	sels map[string]checker.Selection
	// subs, manys: the Subscribe and SubscribeMany streams proxied.
	subs, manys int
}

func (r *recorder) subscribeStreams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subs
}

func (r *recorder) manyStreams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manys
}

// setSelections gives the checker, for the Hellos that carry selections, a model of each
// selected view's filter and shard written apart from the player's.
func (r *recorder) setSelections(sels map[string]checker.Selection) {
	r.mu.Lock()
	r.sels = sels
	r.mu.Unlock()
}

func newRecorder(t *testing.T, upstream string) *recorder {
	t.Helper()
	r := &recorder{check: checker.New(), upstream: upstream, hellos: map[string][]*statecastv1.Hello{}, resyncs: map[string]int{}, snaps: map[string]int{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = lis.Addr().String()
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	statecastv1.RegisterPlayerServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *recorder) setUpstream(addr string) {
	r.mu.Lock()
	r.upstream = addr
	r.mu.Unlock()
}

// helloes returns the Hellos target sent, in order.
func (r *recorder) helloes(target string) []*statecastv1.Hello {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*statecastv1.Hello(nil), r.hellos[target]...)
}

func (r *recorder) resyncCount(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resyncs[target]
}

// snapshots returns how many snapshots the player began sending to target.
func (r *recorder) snapshots(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snaps[target]
}

func (r *recorder) Subscribe(down statecastv1.Player_SubscribeServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	first, err := down.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(3, "conformance proxy: the first message is not a Hello")
	}
	target := hello.GetClientId()
	r.mu.Lock()
	r.subs++
	up := r.upstream
	r.hellos[target] = append(r.hellos[target], hello)
	r.mu.Unlock()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	cc, err := dialUpstream(up)
	if err != nil {
		return err
	}
	defer cc.Close()
	stream, err := statecastv1.NewPlayerClient(cc).Subscribe(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	sels := r.sels
	r.mu.Unlock()
	if len(hello.GetSelections()) > 0 && sels != nil {
		var resume *int64
		if hello.ResumeIndex != nil {
			ri := hello.GetResumeIndex()
			resume = &ri
		}
		r.check.HelloSelect(target, hello.GetViews(), resume, sels)
	} else {
		r.check.HelloMsg(hello)
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	go func() {
		for {
			m, err := down.Recv()
			if err != nil {
				_ = stream.CloseSend()
				return
			}
			if stream.Send(m) != nil {
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err // the player's status, as it sent it
		}
		r.record(target, m)
		if err := down.Send(m); err != nil {
			return err
		}
	}
}

// SubscribeMany forwards a SubscribeMany stream to the player's current address as it is,
// and records each channel's frames in the checker under the client id of its Hello.
func (r *recorder) SubscribeMany(down statecastv1.Player_SubscribeManyServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	r.mu.Lock()
	r.manys++
	up := r.upstream
	r.mu.Unlock()
	cc, err := dialUpstream(up)
	if err != nil {
		return err
	}
	defer cc.Close()
	stream, err := statecastv1.NewPlayerClient(cc).SubscribeMany(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	targets := map[uint32]string{} // channel -> client id
	go func() {
		for {
			m, err := down.Recv()
			if err != nil {
				_ = stream.CloseSend()
				return
			}
			if hello := m.GetRequest().GetHello(); hello != nil {
				mu.Lock()
				targets[m.GetChannel()] = hello.GetClientId()
				mu.Unlock()
				r.mu.Lock()
				r.hellos[hello.GetClientId()] = append(r.hellos[hello.GetClientId()], hello)
				r.mu.Unlock()
				r.check.HelloMsg(hello)
			}
			if stream.Send(m) != nil {
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err // the player's status, as it sent it
		}
		if resp := m.GetResponse(); resp != nil {
			mu.Lock()
			target := targets[m.GetChannel()]
			mu.Unlock()
			r.record(target, resp)
		}
		if err := down.Send(m); err != nil {
			return err
		}
	}
}

// dialUpstream connects to the player a stream is forwarded to.
func dialUpstream(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// record checks a frame the player sent target and counts its resyncs and snapshots.
func (r *recorder) record(target string, m *statecastv1.SubscribeResponse) {
	r.check.Response(target, m)
	if m.GetResyncRequired() != nil || m.GetSnapshotBegin() != nil {
		r.mu.Lock()
		if m.GetResyncRequired() != nil {
			r.resyncs[target]++
		} else {
			r.snaps[target]++
		}
		r.mu.Unlock()
	}
}
