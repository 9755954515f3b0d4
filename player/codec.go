package player

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// rawFrame is an already marshalled SubscribeResponse: the codec sends its bytes as they
// are. This is how an entry is encoded once for all targets.
type rawFrame []byte

// rawParts is an already marshalled SubscribeResponse in parts, sent one after the other
// without being joined (a multi-entry batch: header + each entry's shared bytes).
type rawParts [][]byte

// codec is the gRPC "proto" codec plus pass-through of rawFrame and rawParts.
type codec struct{ base encoding.CodecV2 }

func newCodec() codec { return codec{base: encoding.GetCodecV2(proto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case rawFrame:
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	case rawParts:
		bs := make(mem.BufferSlice, len(r))
		for i, b := range r {
			bs[i] = mem.SliceBuffer(b)
		}
		return bs, nil
	}
	return c.base.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c codec) Name() string { return c.base.Name() }
