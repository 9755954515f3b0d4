package player

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// item is one element of a target queue: a stream entry (wire = the marshalled Entry
// message, shared by every target) or a frame (wire = a whole marshalled
// SubscribeResponse, e.g. SnapshotBegin). Items are immutable once built.
type item struct {
	index      int64
	view       string
	key        string
	kind       statecastv1.Kind
	tombstone  bool
	logTime    time.Time // Kafka record timestamp
	dispatched time.Time // when the main fetcher dispatched it (zero for recovery items)
	wire       []byte
	single     []byte                         // entries: the one-entry batch frame (wire is its tail)
	frame      *statecastv1.SubscribeResponse // non-nil for frames
}

func (it *item) size() int {
	if it.single != nil {
		return len(it.single) + 64
	}
	return len(it.wire) + 64
}

var kinds = map[record.Kind]statecastv1.Kind{
	record.KindRow:        statecastv1.Kind_KIND_ROW,
	record.KindEpochBegin: statecastv1.Kind_KIND_EPOCH_BEGIN,
	record.KindEpochEnd:   statecastv1.Kind_KIND_EPOCH_END,
	record.KindPoll:       statecastv1.Kind_KIND_POLL,
}

// itemOf decodes a Kafka record into an entry item, marshalling its Entry once.
// Records with missing or malformed headers are still delivered: the view then comes from
// the key (schemas/README.md) and the kind is row.
func itemOf(m *sarama.ConsumerMessage) *item {
	e := &statecastv1.Entry{Index: m.Offset, Key: m.Key, Value: m.Value, Tombstone: m.Value == nil}
	meta, err := recordsarama.Meta(m)
	if err != nil {
		e.Kind = statecastv1.Kind_KIND_ROW
		if v, kerr := record.KeyView(m.Key); kerr == nil {
			e.View = v
		}
		for _, h := range m.Headers {
			if h != nil && string(h.Key) == record.HeaderView && record.ValidViewName(string(h.Value)) {
				e.View = string(h.Value)
			}
		}
	} else {
		e.View = meta.View
		e.Kind = kinds[meta.Kind]
		e.Epoch = int64(meta.Epoch)
		if !meta.SourceTime.IsZero() {
			e.SourceTime = timestamppb.New(meta.SourceTime)
		}
		e.SourceLsn = meta.SourceLSN
	}
	// proto3 strings must be valid UTF-8; a malformed header must not make the entry vanish.
	e.View, e.SourceLsn = strings.ToValidUTF8(e.View, "\uFFFD"), strings.ToValidUTF8(e.SourceLsn, "\uFFFD")
	// One buffer holds the one-entry frame SubscribeResponse{batch{entries: [e]}}; the
	// Entry bytes are its tail. A one-entry batch (the common case at low rates) is then
	// sent to every target without any encoding or copy of ours.
	size := proto.Size(e)
	inner := protowire.SizeTag(1) + protowire.SizeBytes(size)
	hdr := protowire.SizeTag(1) + protowire.SizeVarint(uint64(inner)) + protowire.SizeTag(1) + protowire.SizeVarint(uint64(size))
	buf := make([]byte, 0, hdr+size)
	buf = protowire.AppendTag(buf, 1, protowire.BytesType) // SubscribeResponse.batch
	buf = protowire.AppendVarint(buf, uint64(inner))
	buf = protowire.AppendTag(buf, 1, protowire.BytesType) // Batch.entries
	buf = protowire.AppendVarint(buf, uint64(size))
	buf, err = proto.MarshalOptions{}.MarshalAppend(buf, e)
	if err != nil || len(buf) != hdr+size {
		panic(fmt.Sprintf("player: marshal entry: %v", err)) // unreachable: every field is valid
	}
	return &item{
		index: m.Offset, view: e.View, key: string(m.Key), kind: e.Kind,
		tombstone: e.Tombstone, logTime: m.Timestamp, wire: buf[hdr:], single: buf,
	}
}

// frameItem wraps a non-batch response frame.
func frameItem(index int64, r *statecastv1.SubscribeResponse) *item {
	wire, _ := proto.Marshal(r)
	return &item{index: index, frame: r, wire: wire}
}

// encodeBatch appends a SubscribeResponse{batch: Batch{entries}} made of the items'
// pre-marshalled Entry bytes to dst, without re-encoding the entries. With dst nil and a
// single item it returns the item's own (shared, read-only) frame bytes.
func encodeBatch(dst []byte, items []*item) []byte {
	if len(items) == 1 && dst == nil {
		if items[0].frame != nil {
			return items[0].wire // shared and immutable, like every item's bytes
		}
		if items[0].single != nil {
			return items[0].single
		}
	}
	if len(items) == 1 && items[0].frame != nil {
		return append(dst, items[0].wire...)
	}
	inner := 0
	for _, it := range items {
		inner += protowire.SizeTag(1) + protowire.SizeBytes(len(it.wire))
	}
	dst = slices.Grow(dst, protowire.SizeTag(1)+protowire.SizeBytes(inner))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // SubscribeResponse.batch
	dst = protowire.AppendVarint(dst, uint64(inner))
	for _, it := range items {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType) // Batch.entries
		dst = protowire.AppendBytes(dst, it.wire)
	}
	return dst
}

// encodeProgress returns a marshalled SubscribeResponse{progress: {index}}.
func encodeProgress(index int64) []byte {
	b, _ := proto.Marshal(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: index}}})
	return b
}
