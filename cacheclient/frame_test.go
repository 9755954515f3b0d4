package cacheclient

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// toProto converts a decoded frame back to the generated type.
func (f *frame) toProto() *statecastv1.SubscribeResponse {
	r := f.toProtoMsg()
	r.HeadIndex = f.head
	r.TopicId = f.topic
	return r
}

func (f *frame) toProtoMsg() *statecastv1.SubscribeResponse {
	switch f.kind {
	case frameBatch:
		b := &statecastv1.Batch{}
		for i := range f.entries {
			e := &f.entries[i]
			pe := &statecastv1.Entry{Index: e.index, Key: e.key, Value: e.value, Tombstone: e.tombstone,
				View: e.view, Kind: e.kind, Epoch: e.epoch, SourceLsn: string(e.sourceLSN), Txn: e.txn}
			if e.hasTime {
				pe.SourceTime = &timestamppb.Timestamp{Seconds: e.seconds, Nanos: e.nanos}
			}
			b.Entries = append(b.Entries, pe)
		}
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: b}}
	case frameProgress:
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: f.index}}}
	case frameSnapshotBegin:
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: f.index, Views: f.views}}}
	case frameSnapshotEnd:
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: f.index}}}
	case frameResync:
		return &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: &statecastv1.ResyncRequired{
			Reason: f.reason, Detail: f.detail, LogStart: f.logStart}}}
	}
	return &statecastv1.SubscribeResponse{}
}

// dropUnknown clears the unknown fields of m and of every message in it.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				dropUnknown(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			dropUnknown(v.Message())
		}
		return true
	})
}

func frameSeeds() [][]byte {
	ts := timestamppb.New(testTime)
	msgs := []*statecastv1.SubscribeResponse{
		{},
		{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: []*statecastv1.Entry{
			{Index: 7, Key: []byte("users|42"), Value: []byte(`{"id":42}`), View: "users", Kind: statecastv1.Kind_KIND_ROW, Epoch: 3, SourceTime: ts, SourceLsn: "0/16B3748", Txn: true},
			{Index: 8, Key: []byte("users|43"), Tombstone: true, View: "users", Kind: statecastv1.Kind_KIND_ROW},
			{Index: 9, Value: []byte(`{"epoch":3,"rows":1,"hash":"00"}`), View: "users", Kind: statecastv1.Kind_KIND_EPOCH_END, SourceTime: &timestamppb.Timestamp{}},
			{Index: 10, Key: []byte("!ctl|position"), Value: []byte(`{"lsn":"0/16B3748","time":"2026-11-29T19:25:06Z"}`), Kind: statecastv1.Kind_KIND_POSITION, SourceTime: ts, SourceLsn: "0/16B3748"},
			{Index: -1, Kind: statecastv1.Kind(99), View: "other"},
		}}}},
		{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{}}},
		{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 1 << 40}}},
		{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 5, Views: []string{"users", "", "é"}}}},
		{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: 5}}},
		{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: &statecastv1.ResyncRequired{
			Reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START, Detail: "gone", LogStart: 100}}},
		{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 9}}, HeadIndex: 12},
		{HeadIndex: -1},
		{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: 5}}, TopicId: []byte("0123456789abcdef"), HeadIndex: 7},
		{TopicId: []byte{}},
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	// Hand-made: unknown fields, wrong wire types, repeated and switched oneof members,
	// invalid UTF-8, truncation.
	unk := protowire.AppendTag(nil, 99, protowire.VarintType)
	unk = protowire.AppendVarint(unk, 5)
	wrong := protowire.AppendTag(nil, wire.EntryIndex, protowire.Fixed64Type) // index as fixed64: unknown
	wrong = protowire.AppendFixed64(wrong, 1)
	entry := append(append([]byte{}, wrong...), unk...)
	entry = protowire.AppendTag(entry, wire.EntryView, protowire.BytesType)
	entry = protowire.AppendString(entry, "\xff")
	batch := protowire.AppendTag(nil, wire.BatchEntries, protowire.BytesType)
	batch = protowire.AppendBytes(batch, entry)
	out = append(out,
		protowire.AppendBytes(protowire.AppendTag(nil, wire.SubscribeResponseBatch, protowire.BytesType), batch),
		append(append([]byte{}, out[1]...), out[1]...), // two batches: merged
		append(append([]byte{}, out[1]...), out[3]...), // batch then progress
		append(append([]byte{}, out[3]...), unk...),
		append(append(append([]byte{}, out[7]...), out[1]...), out[7]...), // head, batch (the kind switches), head again
		out[1][:len(out[1])-3],
		[]byte{0, 0},
	)
	return out
}

var testTime = timestamppb.New(timestamppb.Now().AsTime()).AsTime()

// FuzzDecodeFrame checks that decodeFrame is exactly proto.Unmarshal into the generated
// SubscribeResponse (unknown fields aside): same error or no error, same contents.
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range frameSeeds() {
		f.Add(b)
	}
	codec := frameCodec{names: map[string]string{"users": "users"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want statecastv1.SubscribeResponse
		werr := proto.Unmarshal(b, &want)
		var got frame
		gerr := decodeFrame(b, &codec, &got)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("proto.Unmarshal err %v, decodeFrame err %v (% x)", werr, gerr, b)
		}
		if werr != nil {
			return
		}
		dropUnknown(want.ProtoReflect())
		if g := got.toProto(); !proto.Equal(g, &want) {
			t.Fatalf("decoded\n%v\nwant\n%v", g, &want)
		}
	})
}

func TestDecodeFrameAllocs(t *testing.T) {
	es := make([]*statecastv1.Entry, 1000)
	for i := range es {
		es[i] = &statecastv1.Entry{Index: int64(i), Key: []byte("users|k"), Value: []byte(`{"a":1}`), View: "users",
			Kind: statecastv1.Kind_KIND_ROW, SourceTime: timestamppb.New(testTime)}
	}
	b, err := proto.Marshal(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"users": "users"}
	allocs := testing.AllocsPerRun(20, func() {
		var f frame
		if err := decodeFrame(b, &frameCodec{names: names}, &f); err != nil {
			t.Fatal(err)
		}
	})
	// One allocation per message (the entries slice, sized by a first pass), none per row.
	if allocs > 2 {
		t.Fatalf("%v allocations to decode 1000 entries", allocs)
	}
	t.Logf("%v allocations per 1000-entry message", allocs)
}

// BenchmarkDecodeFrame: a 1000-row snapshot batch like the player's (e2e bench values),
// decoded by decodeFrame and, in the same run, by proto.Unmarshal into the generated type.
func BenchmarkDecodeFrame(b *testing.B) {
	es := make([]*statecastv1.Entry, 1000)
	for i := range es {
		es[i] = &statecastv1.Entry{Index: int64(3 * i), Key: fmt.Appendf(nil, "events|%d", i),
			Value: fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation 2"}`, i, i%50, i),
			View:  "events", Kind: statecastv1.Kind_KIND_ROW, Epoch: 1, SourceTime: timestamppb.New(testTime), SourceLsn: "0/1"}
	}
	msg, err := proto.Marshal(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: es}}})
	if err != nil {
		b.Fatal(err)
	}
	names := map[string]string{"events": "events"}
	b.Run("protowire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := materialize(mem.BufferSlice{mem.SliceBuffer(msg)}) // the codec's copy out of gRPC's buffers
			var f frame
			if err := decodeFrame(buf, &frameCodec{names: names}, &f); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/row")
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m statecastv1.SubscribeResponse
			if err := proto.Unmarshal(msg, &m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/row")
	})
}

func TestMaterialize(t *testing.T) {
	for _, parts := range [][]string{nil, {""}, {"a"}, {"ab", "", "cde", "f"}} {
		var bs mem.BufferSlice
		for _, p := range parts {
			bs = append(bs, mem.SliceBuffer([]byte(p)))
		}
		if got, want := materialize(bs), bs.Materialize(); string(got) != string(want) {
			t.Fatalf("%q: got %q, want %q", parts, got, want)
		}
	}
}
