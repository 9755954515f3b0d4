package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestManyClientsOneStream: Clients made WithMany one Many subscribe as channels of one
// SubscribeMany stream (the only stream their connection opens), each receiving its own
// selection: the snapshot, then live moves in and out; one Client closing ends its
// channel only, and the player lets its target go.
func TestManyClientsOneStream(t *testing.T) {
	e := newKafkaEnv(t)
	sports := []string{"soccer", "tennis", "golf"}
	for i := range 30 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, sports[i%3])})
	}
	p, addr, _ := startPlayerP(t, e, nil)
	var mu sync.Mutex
	methods := map[string]int{}
	count := grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		mu.Lock()
		methods[method]++
		mu.Unlock()
		return streamer(ctx, desc, cc, method, opts...)
	})
	m := cacheclient.NewMany()
	defer m.Close()
	clients := make([]*cacheclient.Client, len(sports))
	views := make([]*cacheclient.View[event], len(sports))
	for i, sport := range sports {
		c, err := cacheclient.New(cacheclient.Config{
			Addresses: []string{addr}, Stream: "s", Service: t.Name(),
			BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		}, cacheclient.WithMany(m), cacheclient.WithDialOptions(count))
		if err != nil {
			t.Fatal(err)
		}
		v, err := cacheclient.Register(c, "events", decodeEvent, cacheclient.WithFilter(fmt.Sprintf("sport == %q", sport)))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		clients[i], views[i] = c, v
	}
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	check := func(what string, upTo int64) {
		t.Helper()
		for i, sport := range sports {
			eventually(t, fmt.Sprintf("%s: the %s client", what, sport), func() bool { return clients[i].Position() >= upTo })
			want := subset(e.wantOf("events"), func(_ string, ev event) bool { return ev.Sport == sport })
			if !equalView(views[i], want) {
				t.Errorf("%s: the %s client holds %d rows, want its %d", what, sport, views[i].Len(), len(want))
			}
		}
	}
	for _, c := range clients {
		waitReady(t, c)
	}
	check("after the snapshots", 0)
	// Moves between the selections, a delete.
	e.put("events", [2]string{"0", ev(0, "golf")}, [2]string{"1", ev(1, "soccer")}, [2]string{"3", ""}, [2]string{"5", ev(5, "tennis")})
	check("live", e.epochEnd("events", 0))

	mu.Lock()
	if len(methods) != 1 || methods[statecastv1.Player_SubscribeMany_FullMethodName] != 1 {
		t.Errorf("the connection opened the streams %v, want one SubscribeMany", methods)
	}
	mu.Unlock()
	if n := len(p.Status().Streams[0].Targets); n != 3 {
		t.Errorf("the player holds %d targets, want 3", n)
	}

	// One Client closes: its channel ends, the others go on.
	clients[0].Close()
	clients[0] = nil
	eventually(t, "the closed client's target to go", func() bool { return len(p.Status().Streams[0].Targets) == 2 })
	e.put("events", [2]string{"2", ev(2, "tennis")}, [2]string{"4", ev(4, "golf")})
	upTo := e.epochEnd("events", 0)
	for i := 1; i < len(sports); i++ {
		sport := sports[i]
		eventually(t, "the "+sport+" client after the close", func() bool { return clients[i].Position() >= upTo })
		if want := subset(e.wantOf("events"), func(_ string, ev event) bool { return ev.Sport == sport }); !equalView(views[i], want) {
			t.Errorf("after the close: the %s client holds %d rows, want its %d", sport, views[i].Len(), len(want))
		}
	}
}

// TestManyFailover: when the player of their shared stream stops, the Clients of one Many
// fail over to the next address, each opening a channel of a new stream there, and resume
// where they were (no second snapshot).
func TestManyFailover(t *testing.T) {
	e := newKafkaEnv(t)
	for i := range 20 {
		e.put("events", [2]string{fmt.Sprint(i), ev(i, []string{"soccer", "tennis"}[i%2])})
	}
	addrA, stopA := startPlayer(t, e)
	addrB, _ := startPlayer(t, e)
	m := cacheclient.NewMany()
	defer m.Close()
	sports := []string{"soccer", "tennis"}
	type cl struct {
		c   *cacheclient.Client
		v   *cacheclient.View[event]
		cnt *counting
	}
	var cs []cl
	for _, sport := range sports {
		cnt := &counting{}
		c, err := cacheclient.New(cacheclient.Config{
			Addresses: []string{addrA, addrB}, Stream: "s", Service: t.Name(),
			BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		}, cacheclient.WithMany(m), cacheclient.WithHooks(cnt.hooks()))
		if err != nil {
			t.Fatal(err)
		}
		v, err := cacheclient.Register(c, "events", decodeEvent, cacheclient.WithFilter(fmt.Sprintf("sport == %q", sport)))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, cl{c, v, cnt})
	}
	for _, x := range cs {
		waitReady(t, x.c)
	}
	stopA()
	e.put("events", [2]string{"0", ev(0, "tennis")}, [2]string{"1", ev(1, "soccer")}, [2]string{"2", ""})
	last := e.epochEnd("events", 0)
	for i, x := range cs {
		sport := sports[i]
		eventually(t, "the "+sport+" client after the failover", func() bool { return x.c.Position() >= last })
		if want := subset(e.wantOf("events"), func(_ string, ev event) bool { return ev.Sport == sport }); !equalView(x.v, want) {
			t.Errorf("the %s client holds %d rows, want its %d", sport, x.v.Len(), len(want))
		}
		x.cnt.mu.Lock()
		if x.cnt.snapshots != 1 || len(x.cnt.connects) < 2 || !x.cnt.connects[len(x.cnt.connects)-1] {
			t.Errorf("the %s client: snapshots %d, connects %v; want one snapshot and a resumed reconnect", sport, x.cnt.snapshots, x.cnt.connects)
		}
		x.cnt.mu.Unlock()
	}
}
