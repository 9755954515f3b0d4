package cacheclient

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// The client decodes SubscribeResponse frames itself (frameCodec, forced on the Subscribe
// call; the server is unchanged): one buffer per message holds its bytes, an entry's key
// and value are sub-slices of it and its view name is interned, so a row costs no
// allocation of its own (the generated code allocates an Entry, its key, value, view and
// source time per row). decodeFrame is exactly equivalent to proto.Unmarshal into
// statecastv1.SubscribeResponse (FuzzDecodeFrame compares them): unknown fields and known
// fields of another wire type are skipped, a oneof member repeated is merged, another
// member replaces it, strings must be valid UTF-8.

type frameKind uint8

const (
	frameNone frameKind = iota
	frameBatch
	frameProgress
	frameSnapshotBegin
	frameSnapshotEnd
	frameResync
)

// frame is one decoded SubscribeResponse. Its slices alias the message's own buffer, which
// nothing modifies afterwards.
type frame struct {
	kind    frameKind
	head    int64    // head_index: the player's main position when it sent the frame (0: unknown)
	entries []entry  // Batch
	index   int64    // Progress, SnapshotBegin, SnapshotEnd
	views   []string // SnapshotBegin
	// ResyncRequired
	reason   statecastv1.ResyncRequired_Reason
	detail   string
	logStart int64
}

// entry is one decoded statecastv1.Entry.
type entry struct {
	index     int64
	key       []byte
	value     []byte
	tombstone bool
	view      string
	kind      statecastv1.Kind
	epoch     int64
	hasTime   bool // source_time present
	seconds   int64
	nanos     int32
	sourceLSN []byte // valid UTF-8
}

// sourceTime is the entry's source time, if present.
func (e *entry) sourceTime() (time.Time, bool) {
	if !e.hasTime {
		return time.Time{}, false
	}
	return time.Unix(e.seconds, int64(e.nanos)).UTC(), true
}

var errFrame = errors.New("cacheclient: malformed SubscribeResponse")

// frameCodec marshals requests with protobuf and decodes responses with decodeFrame.
type frameCodec struct {
	names map[string]string // the subscribed views' names, for interning (read-only)
}

func (frameCodec) Name() string { return "proto" } // content-subtype unchanged

func (frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cacheclient: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("cacheclient: cannot unmarshal into %T", v)
	}
	return decodeFrame(materialize(data), c.names, f)
}

// materialize copies data into a new buffer of the message's own (gRPC reuses its
// buffers), like BufferSlice.Materialize but without zeroing the buffer first (a snapshot
// is ~100 MB of messages per million rows): strings.Builder allocates without zeroing.
// The buffer is read-only from here on (the frame aliases it).
func materialize(data mem.BufferSlice) []byte {
	n := data.Len()
	if n == 0 {
		return nil
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, b := range data {
		sb.Write(b.ReadOnlyData())
	}
	s := sb.String()
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// decodeFrame decodes b (a SubscribeResponse) into f, aliasing b.
func decodeFrame(b []byte, names map[string]string, f *frame) error {
	*f = frame{}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		if num >= 1 && num <= 5 && typ == protowire.BytesType {
			m, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errFrame
			}
			b = b[n:]
			k := frameKind(num)
			if f.kind != k {
				*f = frame{kind: k, head: f.head}
			}
			if k == frameBatch && f.entries == nil {
				f.entries = make([]entry, 0, countEntries(m)) // one allocation, no regrowth
			}
			if err := f.decodeMsg(m, names); err != nil {
				return err
			}
			continue
		}
		if num == 10 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errFrame
			}
			b = b[n:]
			f.head = int64(v)
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
	}
	return nil
}

// decodeMsg merges the oneof member message m (of kind f.kind) into f.
func (f *frame) decodeMsg(b []byte, names map[string]string) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		switch {
		case f.kind == frameBatch && num == 1 && typ == protowire.BytesType:
			m, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errFrame
			}
			b = b[n:]
			f.entries = append(f.entries, entry{})
			if err := f.entries[len(f.entries)-1].decode(m, names); err != nil {
				return err
			}
			continue
		case f.kind == frameSnapshotBegin && num == 2 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(s) {
				return errFrame
			}
			b = b[n:]
			f.views = append(f.views, string(s))
			continue
		case f.kind == frameResync && num == 2 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(s) {
				return errFrame
			}
			b = b[n:]
			f.detail = string(s)
			continue
		case typ == protowire.VarintType && (num == 1 && f.kind != frameBatch || num == 3 && f.kind == frameResync):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errFrame
			}
			b = b[n:]
			switch {
			case f.kind == frameResync && num == 1:
				f.reason = statecastv1.ResyncRequired_Reason(int32(v))
			case f.kind == frameResync:
				f.logStart = int64(v)
			default:
				f.index = int64(v)
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
	}
	return nil
}

// decode decodes one Entry message.
func (e *entry) decode(b []byte, names map[string]string) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			if num == 1 || num == 4 || num == 6 || num == 7 {
				v, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return errFrame
				}
				b = b[n:]
				switch num {
				case 1:
					e.index = int64(v)
				case 4:
					e.tombstone = v != 0
				case 6:
					e.kind = statecastv1.Kind(int32(v))
				case 7:
					e.epoch = int64(v)
				}
				continue
			}
		case protowire.BytesType:
			if num == 2 || num == 3 || num == 5 || num == 8 || num == 9 {
				s, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return errFrame
				}
				b = b[n:]
				switch num {
				case 2:
					e.key = s
				case 3:
					e.value = s
				case 5:
					if name, ok := names[string(s)]; ok { // no allocation
						e.view = name
					} else if utf8.Valid(s) {
						e.view = string(s)
					} else {
						return errFrame
					}
				case 8:
					e.hasTime = true
					if err := e.decodeTime(s); err != nil {
						return err
					}
				case 9:
					if !utf8.Valid(s) {
						return errFrame
					}
					e.sourceLSN = s
				}
				continue
			}
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
	}
	return nil
}

// decodeTime merges a google.protobuf.Timestamp into the entry's source time.
func (e *entry) decodeTime(b []byte) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errFrame
			}
			b = b[n:]
			if num == 1 {
				e.seconds = int64(v)
			} else {
				e.nanos = int32(v)
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
	}
	return nil
}

// Accessors named like the generated ones (receive.go reads entries through them).
func (e *entry) GetIndex() int64           { return e.index }
func (e *entry) GetKey() []byte            { return e.key }
func (e *entry) GetValue() []byte          { return e.value }
func (e *entry) GetTombstone() bool        { return e.tombstone }
func (e *entry) GetView() string           { return e.view }
func (e *entry) GetKind() statecastv1.Kind { return e.kind }

func newFrameCodec(views []viewCore) frameCodec {
	names := make(map[string]string, len(views))
	for _, v := range views {
		if n := v.viewName(); utf8.ValidString(n) { // an invalid name is refused by decode
			names[n] = n
		}
	}
	return frameCodec{names: names}
}

// consumeTag is protowire.ConsumeTag that also refuses field numbers above the maximum
// (as proto.Unmarshal does).
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// countEntries counts the entries of a Batch message (0 if it is malformed: decodeMsg
// reports it).
func countEntries(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return n
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return n
		}
		b = b[l:]
		if num == 1 && typ == protowire.BytesType {
			n++
		}
	}
	return n
}
