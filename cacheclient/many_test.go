package cacheclient

import (
	"io"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// FuzzParseMany checks parseMany, and decodeFrame of the response it finds, against
// proto.Unmarshal into the generated SubscribeManyResponse: what one refuses the other
// does (parseMany also refuses a message with both a response and an end, or neither),
// and what both read is the same channel, response and end.
func FuzzParseMany(f *testing.F) {
	for _, m := range []*statecastv1.SubscribeManyResponse{
		{Channel: 7, Response: &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: 12}}, HeadIndex: 40}},
		{Channel: 1 << 31, End: &statecastv1.ChannelEnd{Code: 5, Message: `view "x" not found`}},
		{Channel: 3, Response: &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Batch{Batch: &statecastv1.Batch{Entries: []*statecastv1.Entry{{Index: 9, Key: []byte("users|k"), Value: []byte(`{"a":1}`), View: "users"}}}}}},
		{Channel: 2},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	codec := frameCodec{names: map[string]string{"users": "users"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want statecastv1.SubscribeManyResponse
		werr := proto.Unmarshal(b, &want)
		ch, it, gerr := parseMany(b)
		var got frame
		if gerr == nil && it.err == nil {
			gerr = decodeFrame(it.b, &codec, &got)
		}
		if werr != nil {
			if gerr == nil {
				t.Fatalf("proto.Unmarshal: %v; parseMany and decodeFrame: no error (% x)", werr, b)
			}
			return
		}
		if (want.Response != nil) == (want.End != nil) || occurrences(b, 2) > 1 || occurrences(b, 3) > 1 {
			if gerr == nil {
				t.Fatalf("a response and an end, neither, or either twice: parseMany took it (% x)", b)
			}
			return
		}
		if gerr != nil {
			t.Fatalf("parseMany or decodeFrame: %v; proto.Unmarshal: no error (% x)", gerr, b)
		}
		if ch != want.Channel {
			t.Fatalf("channel %d, want %d", ch, want.Channel)
		}
		if want.End != nil && want.End.Code == 0 {
			if it.err != io.EOF {
				t.Fatalf("end %v, want io.EOF for an end with OK", it.err)
			}
			return
		}
		if want.End != nil {
			st, ok := status.FromError(it.err)
			if !ok || int32(st.Code()) != want.End.Code || st.Message() != want.End.Message {
				t.Fatalf("end %v, want %v", it.err, want.End)
			}
			return
		}
		dropUnknown(want.Response.ProtoReflect())
		if g := got.toProto(); !proto.Equal(g, want.Response) {
			t.Fatalf("response\n%v\nwant\n%v", g, want.Response)
		}
	})
}

// occurrences counts the fields numbered num of wire type bytes in b (a valid message).
func occurrences(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return n
		}
		b = b[l:]
		if f == num && typ == protowire.BytesType {
			n++
		}
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return n
		}
		b = b[l:]
	}
	return n
}
