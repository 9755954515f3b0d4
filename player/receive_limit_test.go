package player

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// TestReceiveLimit: a client tells the player the largest message it receives
// (Hello.max_message_bytes). A limit below max_record_bytes plus the frame's room is
// refused with FailedPrecondition naming both limits; a limit that fits gets every record,
// in a snapshot and in a replay, in batches cut to it — through a gRPC stream that
// enforces the limit, where the player's default 1 MiB batches would end the stream.
func TestReceiveLimit(t *testing.T) {
	e := newEnv(t, nil)
	end := e.produce(200, []string{"a"}, 8<<10, newRand(1)) // ~8 KiB rows over 50 keys
	tp := startPlayer(t, e, func(c *Config) { c.MaxRecordBytes = 32 << 10 })
	conn, err := grpc.NewClient(tp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subscribe := func(id string, limit uint32, resume *int64) statecastv1.Player_SubscribeClient {
		st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx, grpc.MaxCallRecvMsgSize(int(limit)))
		if err == nil {
			err = st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{
				ClientId: id, Stream: "s", ResumeIndex: resume, MaxMessageBytes: limit}}})
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	_, err = subscribe("small", 16<<10, nil).Recv()
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a client receiving at most 16 KiB from a player serving 32 KiB records: %v, want FailedPrecondition", err)
	}
	for _, want := range []string{"at most 16384 bytes", "max_record_bytes 32768", "at least 33792"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	const limit = 48 << 10
	zero := int64(0)
	for name, resume := range map[string]*int64{"snapshot": nil, "replay": &zero} {
		st := subscribe(name, limit, resume)
		seen, entries, multi := int64(-1), 0, 0
		for seen < end {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("%s: the stream ended at index %d of %d: %v", name, seen, end, err)
			}
			if n := proto.Size(m); n > limit {
				t.Fatalf("%s: a message of %d bytes, over the client's %d", name, n, limit)
			}
			es := m.GetBatch().GetEntries()
			entries += len(es)
			if len(es) > 1 {
				multi++
			}
			for _, en := range es {
				seen = max(seen, en.GetIndex())
			}
			seen = max(seen, m.GetProgress().GetIndex(), m.GetSnapshotEnd().GetIndex())
		}
		if multi == 0 {
			t.Errorf("%s: %d entries, never more than one per batch: the batches were not cut to the limit but to one entry", name, entries)
		}
	}
}
