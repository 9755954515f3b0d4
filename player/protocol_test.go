package player

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

func TestStatusTable(t *testing.T) {
	for _, row := range StatusTable {
		err := toStatus(fmt.Errorf("wrapped: %w", row.Err))
		if got := status.Code(err); got != row.Code {
			t.Errorf("%v -> %v, want %v", row.Err, got, row.Code)
		}
	}
	if got := status.Code(toStatus(errors.New("boom"))); got != codes.Internal {
		t.Errorf("unknown error -> %v, want Internal", got)
	}
}

func hello(name string, resume *int64, views ...string) *statecastv1.SubscribeRequest {
	return &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{ClientId: "c", Stream: name, Views: views, ResumeIndex: resume}}}
}

func ackReq(i int64) *statecastv1.SubscribeRequest {
	return &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: i}}}
}

// TestProtocolErrors drives the error table through a real player: each bad conversation
// ends with its documented gRPC code. Health reports SERVING; reflection, when enabled,
// lists the services.
func TestProtocolErrors(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(10, []string{"a"}, 10, newRand(1))
	tp := startPlayer(t, e, func(c *Config) { c.AckTimeout = 400 * time.Millisecond; c.Reflection = true })
	conn, err := grpc.NewClient(tp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "statecast.v1.Player"})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}

	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	lr, err := rc.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var names []string
	for _, s := range lr.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "statecast.v1.Player") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", names)
	}
	_ = rc.CloseSend()

	neg := int64(-5)
	newer, current := hello("s", nil), hello("s", nil)
	newer.GetHello().ProtocolVersion = wire.ProtocolVersion + 1
	current.GetHello().ProtocolVersion = wire.ProtocolVersion
	tests := []struct {
		name string
		send []*statecastv1.SubscribeRequest
		recv bool // read frames until the stream ends
		want codes.Code
	}{
		{"first message is an ack", []*statecastv1.SubscribeRequest{ackReq(1)}, false, codes.InvalidArgument},
		{"unknown stream", []*statecastv1.SubscribeRequest{hello("nope", nil)}, false, codes.NotFound},
		{"bad view name", []*statecastv1.SubscribeRequest{hello("s", nil, "a|b")}, false, codes.InvalidArgument},
		{"unknown view", []*statecastv1.SubscribeRequest{hello("s", nil, "a", "nope")}, false, codes.NotFound},
		{"negative resume", []*statecastv1.SubscribeRequest{hello("s", &neg)}, false, codes.InvalidArgument},
		{"ack above what was sent", []*statecastv1.SubscribeRequest{hello("s", nil), ackReq(1 << 40)}, true, codes.InvalidArgument},
		{"second hello", []*statecastv1.SubscribeRequest{hello("s", nil), hello("s", nil)}, true, codes.InvalidArgument},
		{"never acks", []*statecastv1.SubscribeRequest{hello("s", nil)}, true, codes.DeadlineExceeded},
		{"client newer than the player", []*statecastv1.SubscribeRequest{newer}, false, codes.FailedPrecondition},
		{"client of this version", []*statecastv1.SubscribeRequest{current, ackReq(1 << 40)}, true, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.send {
				if err := st.Send(m); err != nil {
					t.Fatal(err)
				}
			}
			for {
				_, err = st.Recv()
				if err != nil {
					break
				}
			}
			if got := status.Code(err); got != tc.want {
				t.Fatalf("ended with %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == codes.FailedPrecondition && !strings.Contains(err.Error(), fmt.Sprintf("protocol version %d, this player at most %d", wire.ProtocolVersion+1, wire.ProtocolVersion)) {
				t.Fatalf("the refusal does not name both versions: %v", err)
			}
		})
	}
}
