package checker

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

func TestProtoAdapter(t *testing.T) {
	batch := func(idx ...int64) *statecastv1.SubscribeResponse {
		var es []*statecastv1.Entry
		for _, en := range e(idx...) {
			k := statecastv1.Kind_KIND_ROW
			if en.Kind == KindPoll {
				k = statecastv1.Kind_KIND_POLL
			}
			es = append(es, &statecastv1.Entry{Index: en.Index, Key: []byte(en.Key), View: en.View, Kind: k, Tombstone: en.Tombstone})
		}
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}}
	}
	c := New()
	c.HelloMsg(&statecastv1.Hello{ClientId: "t", Views: va})
	c.Response("t", &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 2, Views: va}}})
	c.Response("t", batch(0, 2))
	c.Response("t", &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 2}}})
	c.Response("t", batch(3, 4))
	c.HelloMsg(&statecastv1.Hello{ClientId: "t", Views: va, ResumeIndex: proto.Int64(4)})
	c.Response("t", &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 4}}})
	c.Response("t", batch(5, 8))
	if err := c.Check(topic); err != nil {
		t.Fatal(err)
	}
	c.Response("t", batch(8))
	if err := c.Check(topic); !errors.Is(err, ErrUnique) {
		t.Fatalf("Check = %v, want unique", err)
	}
}
