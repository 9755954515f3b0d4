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
	"github.com/statecast/statecast/schemas/wire"
)

// The client decodes SubscribeResponse frames itself (frameCodec, forced on the Subscribe
// call; the server is unchanged): one buffer per message holds its bytes, an entry's key
// and value are sub-slices of it and its view name is interned, so a row costs no
// allocation of its own (the generated code allocates an Entry, its key, value, view and
// source time per row). decodeFrame is exactly equivalent to proto.Unmarshal into
// statecastv1.SubscribeResponse (FuzzDecodeFrame compares them): unknown fields and known
// fields of another wire type are skipped, a oneof member repeated is merged, another
// member replaces it, strings must be valid UTF-8. Field numbers come from schemas/wire,
// which a test checks against the generated descriptors; enum values are the generated
// constants.

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
	topic   []byte   // topic_id: the Kafka topic ID of the stream's topic (empty: not sent)
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
	txn       bool   // sc-txn: applied with the entries up to the next position entry
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
	// maxEntries bounds the entries of a Batch (the client's MaxBatchEntries, which it
	// asks the player for in Hello) and maxViews the views of a SnapshotBegin (the
	// client's own): a frame past them is refused before anything is allocated for what
	// exceeds them, so a frame's allocation is bounded by these and its bytes, never by
	// what it claims (a 4 MiB frame of empty entries would take 288 MiB of entry structs).
	// 0: no bound.
	maxEntries, maxViews int
}

// errFrameBound is a frame past the client's bounds (frameCodec).
var errFrameBound = errors.New("cacheclient: SubscribeResponse past the client's bounds")

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
	return decodeFrame(materialize(data), &c, f)
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

// decodeFrame decodes b (a SubscribeResponse) into f, aliasing b, within c's bounds.
func decodeFrame(b []byte, c *frameCodec, f *frame) error {
	*f = frame{}
	for len(b) > 0 {
		t, v, s := consumeField(&b)
		if k := memberKind(t); k != frameNone {
			if f.kind != k { // another oneof member replaces the one decoded so far
				*f = frame{kind: k, head: f.head, topic: f.topic}
			}
			if k == frameBatch && f.entries == nil {
				n := countEntries(s)
				if c.maxEntries > 0 && n > c.maxEntries {
					return fmt.Errorf("%w: a batch of %d entries, more than MaxBatchEntries (%d)", errFrameBound, n, c.maxEntries)
				}
				f.entries = make([]entry, 0, n) // one allocation, no regrowth
			}
			if err := f.decodeMsg(s, c); err != nil {
				return err
			}
		} else if t == tag(wire.SubscribeResponseHeadIndex, protowire.VarintType) {
			f.head = int64(v)
		} else if t == tag(wire.SubscribeResponseTopicID, protowire.BytesType) {
			f.topic = s
		} else if t == malformed {
			return errFrame
		}
	}
	return nil
}

// memberKind is the frame kind of a SubscribeResponse field of tag t that is a member of
// its oneof (frameNone for other fields).
func memberKind(t uint64) frameKind {
	switch t {
	case tag(wire.SubscribeResponseBatch, protowire.BytesType):
		return frameBatch
	case tag(wire.SubscribeResponseProgress, protowire.BytesType):
		return frameProgress
	case tag(wire.SubscribeResponseSnapshotBegin, protowire.BytesType):
		return frameSnapshotBegin
	case tag(wire.SubscribeResponseSnapshotEnd, protowire.BytesType):
		return frameSnapshotEnd
	case tag(wire.SubscribeResponseResyncRequired, protowire.BytesType):
		return frameResync
	}
	return frameNone
}

// decodeMsg merges the oneof member message b (of kind f.kind) into f.
func (f *frame) decodeMsg(b []byte, c *frameCodec) error {
	for len(b) > 0 {
		t, v, s := consumeField(&b)
		switch k := f.kind; {
		case t == malformed:
			return errFrame
		case k == frameBatch && t == tag(wire.BatchEntries, protowire.BytesType):
			if c.maxEntries > 0 && len(f.entries) >= c.maxEntries { // a second Batch merged in
				return fmt.Errorf("%w: a batch of more than MaxBatchEntries (%d) entries", errFrameBound, c.maxEntries)
			}
			f.entries = append(f.entries, entry{})
			if err := f.entries[len(f.entries)-1].decode(s, c.names); err != nil {
				return err
			}
		case k == frameProgress && t == tag(wire.ProgressIndex, protowire.VarintType),
			k == frameSnapshotBegin && t == tag(wire.SnapshotBeginIndex, protowire.VarintType),
			k == frameSnapshotEnd && t == tag(wire.SnapshotEndIndex, protowire.VarintType):
			f.index = int64(v)
		case k == frameSnapshotBegin && t == tag(wire.SnapshotBeginViews, protowire.BytesType):
			if !utf8.Valid(s) {
				return errFrame
			}
			if c.maxViews > 0 && len(f.views) >= c.maxViews {
				return fmt.Errorf("%w: a snapshot of more than the client's %d views", errFrameBound, c.maxViews)
			}
			if name, ok := c.names[string(s)]; ok {
				f.views = append(f.views, name)
			} else {
				f.views = append(f.views, string(s))
			}
		case k == frameResync && t == tag(wire.ResyncRequiredReason, protowire.VarintType):
			f.reason = statecastv1.ResyncRequired_Reason(int32(v))
		case k == frameResync && t == tag(wire.ResyncRequiredDetail, protowire.BytesType):
			if !utf8.Valid(s) {
				return errFrame
			}
			f.detail = string(s)
		case k == frameResync && t == tag(wire.ResyncRequiredLogStart, protowire.VarintType):
			f.logStart = int64(v)
		}
	}
	return nil
}

// decode decodes one Entry message.
func (e *entry) decode(b []byte, names map[string]string) error {
	for len(b) > 0 {
		switch t, v, s := consumeField(&b); t {
		case malformed:
			return errFrame
		case tag(wire.EntryIndex, protowire.VarintType):
			e.index = int64(v)
		case tag(wire.EntryKey, protowire.BytesType):
			e.key = s
		case tag(wire.EntryValue, protowire.BytesType):
			e.value = s
		case tag(wire.EntryTombstone, protowire.VarintType):
			e.tombstone = v != 0
		case tag(wire.EntryView, protowire.BytesType):
			if name, ok := names[string(s)]; ok { // no allocation
				e.view = name
			} else if utf8.Valid(s) {
				e.view = string(s)
			} else {
				return errFrame
			}
		case tag(wire.EntryKind, protowire.VarintType):
			e.kind = statecastv1.Kind(int32(v))
		case tag(wire.EntryEpoch, protowire.VarintType):
			e.epoch = int64(v)
		case tag(wire.EntrySourceTime, protowire.BytesType):
			e.hasTime = true
			if err := e.decodeTime(s); err != nil {
				return err
			}
		case tag(wire.EntrySourceLSN, protowire.BytesType):
			if !utf8.Valid(s) {
				return errFrame
			}
			e.sourceLSN = s
		case tag(wire.EntryTxn, protowire.VarintType):
			e.txn = v != 0
		}
	}
	return nil
}

// decodeTime merges a google.protobuf.Timestamp into the entry's source time.
func (e *entry) decodeTime(b []byte) error {
	for len(b) > 0 {
		switch t, v, _ := consumeField(&b); t {
		case tag(wire.TimestampSeconds, protowire.VarintType):
			e.seconds = int64(v)
		case tag(wire.TimestampNanos, protowire.VarintType):
			e.nanos = int32(v)
		case malformed:
			return errFrame
		}
	}
	return nil
}

func newFrameCodec(views []viewCore, maxEntries int) frameCodec {
	names := make(map[string]string, len(views))
	for _, v := range views {
		if n := v.viewName(); utf8.ValidString(n) { // an invalid name is refused by decode
			names[n] = n
		}
	}
	return frameCodec{names: names, maxEntries: maxEntries, maxViews: len(views)}
}

// consumeField consumes the first field of *b (not empty), value included, and returns
// the field's tag t (its number and wire type: compare it with tag(…)) and its value: v
// for a varint, s for a length-delimited field (aliasing *b); values of other wire types
// are skipped. On malformed input t is malformed. Every decoder above reads its message
// with it, one call per field. Field numbers above the maximum are malformed (as for
// proto.Unmarshal).
func consumeField(b *[]byte) (t, v uint64, s []byte) {
	in := *b
	num, typ, tl := protowire.Number(in[0]>>3), protowire.Type(in[0]&7), 1
	if in[0] < 1<<3 || in[0] >= 0x80 { // not a one-byte tag (field numbers 1 to 15)
		num, typ, tl = protowire.ConsumeTag(in)
		if tl < 0 || num > protowire.MaxValidNumber {
			return malformed, 0, nil
		}
	}
	var n int
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(in[tl:])
	case protowire.BytesType:
		s, n = protowire.ConsumeBytes(in[tl:])
	default:
		n = protowire.ConsumeFieldValue(num, typ, in[tl:])
	}
	if n < 0 {
		return malformed, 0, nil
	}
	*b = in[tl+n:]
	return protowire.EncodeTag(num, typ), v, s
}

// malformed is consumeField's tag for malformed input (no field has number 0).
const malformed = 0

// tag is the tag consumeField returns for field num of wire type typ. A known number with
// another wire type is an unknown field to protobuf: the decoders ignore it.
func tag(num protowire.Number, typ protowire.Type) uint64 { return protowire.EncodeTag(num, typ) }

// countEntries counts the entries of a Batch message (as far as it is well-formed:
// decodeMsg reports the rest).
func countEntries(b []byte) int {
	c := 0
	for len(b) > 0 {
		t, _, _ := consumeField(&b)
		if t == malformed {
			break
		}
		if t == tag(wire.BatchEntries, protowire.BytesType) {
			c++
		}
	}
	return c
}
