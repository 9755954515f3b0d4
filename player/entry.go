package player

import (
	"fmt"
	"slices"
	"strings"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
	"github.com/statecast/statecast/schemas/wire"
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
	txn        bool  // sc-txn: part of a source transaction that ends at the next position entry
	dispatched int64 // when the main fetcher dispatched it, Unix ns (0 for recovery items)
	wire       []byte
	single     []byte                         // entries: the one-entry batch frame (wire is its tail)
	frame      *statecastv1.SubscribeResponse // non-nil for frames
	stale      []string                       // position entries: the stale views the value names
}

// isRow reports whether the item is a row entry of the stream (a record without a kind is
// one, see itemOf), the kind the player materializes for snapshots.
func (it *item) isRow() bool {
	return it.kind == statecastv1.Kind_KIND_ROW || it.kind == statecastv1.Kind_KIND_UNSPECIFIED
}

// size is what an item counts for in a queue's byte budget: its bytes on the wire and
// about its own struct.
func (it *item) size() int {
	if it.single != nil {
		return len(it.single) + itemOverhead
	}
	return len(it.wire) + itemOverhead
}

const itemOverhead = 64

var kinds = map[record.Kind]statecastv1.Kind{
	record.KindRow:        statecastv1.Kind_KIND_ROW,
	record.KindEpochBegin: statecastv1.Kind_KIND_EPOCH_BEGIN,
	record.KindEpochEnd:   statecastv1.Kind_KIND_EPOCH_END,
	record.KindPoll:       statecastv1.Kind_KIND_POLL,
	record.KindPosition:   statecastv1.Kind_KIND_POSITION,
}

// isPosition reports whether the item is a position entry: it belongs to the stream, not
// to a view, and goes to every target whatever its views.
func (it *item) isPosition() bool { return it.kind == statecastv1.Kind_KIND_POSITION }

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
		e.Txn = meta.Txn
	}
	// proto3 strings must be valid UTF-8; a malformed header must not make the entry vanish.
	e.View, e.SourceLsn = strings.ToValidUTF8(e.View, "\uFFFD"), strings.ToValidUTF8(e.SourceLsn, "\uFFFD")
	return entryItem(e)
}

// entryItem marshals e once into an entry item.
func entryItem(e *statecastv1.Entry) *item {
	// One buffer holds the one-entry frame SubscribeResponse{batch{entries: [e]}}; the
	// Entry bytes are its tail. A one-entry batch (the common case at low rates) is then
	// sent to every target without any encoding or copy of ours.
	size := proto.Size(e)
	inner := protowire.SizeTag(wire.BatchEntries) + protowire.SizeBytes(size)
	hdr := protowire.SizeTag(wire.SubscribeResponseBatch) + protowire.SizeVarint(uint64(inner)) +
		protowire.SizeTag(wire.BatchEntries) + protowire.SizeVarint(uint64(size))
	buf := make([]byte, 0, hdr+size)
	buf = protowire.AppendTag(buf, wire.SubscribeResponseBatch, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(inner))
	buf = protowire.AppendTag(buf, wire.BatchEntries, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, e)
	if err != nil || len(buf) != hdr+size {
		panic(fmt.Sprintf("player: marshal entry: %v", err)) // unreachable: every field is valid
	}
	it := &item{
		index: e.Index, view: e.View, key: string(e.Key), kind: e.Kind,
		tombstone: e.Tombstone, txn: e.Txn, wire: buf[hdr:], single: buf,
	}
	if it.isPosition() {
		it.stale = staleOf(e.Value)
	}
	return it
}

// recordFrameOverhead is about what a record's frame adds to its key, value and headers
// (the entry's fields and tags, the batch around it, head_index).
const recordFrameOverhead = 128

// Why a record is skipped (poison), the label of records_skipped_total.
const (
	skipViewMismatch = "view_mismatch"
	skipTooLarge     = "too_large"
)

// poison reports why the player does not serve a record ("" when it does). A row whose
// sc-view header names another view than its key (a foreign producer on the topic) would
// fail every client's check of the entry forever, a fresh snapshot included; a record
// whose frame is over what clients receive would end their stream at every attempt. Both
// are skipped in every path (materialized copy, dispatch, history, recovery), so every
// target sees the same stream.
func poison(it *item, maxBytes int) string {
	if it.frame == nil && len(it.single) > maxBytes {
		return skipTooLarge
	}
	if it.isRow() && !keyOfView(it.key, it.view) {
		return skipViewMismatch
	}
	return ""
}

// keyOfView reports whether key is a record key of view, as record.KeyView decides it,
// without its allocation in the common case (KeyView's own fast path: an unescaped view
// name before the first '|').
func keyOfView(key, view string) bool {
	if i := strings.IndexByte(key, '|'); i > 0 && !strings.Contains(key[:i], `\`) {
		return key[:i] == view
	}
	v, err := record.KeyView([]byte(key))
	return err == nil && v == view
}

// frameItem wraps a non-batch response frame.
func frameItem(index int64, r *statecastv1.SubscribeResponse) *item {
	wire, _ := proto.Marshal(r)
	return &item{index: index, frame: r, wire: wire}
}

// batchParts returns the SubscribeResponse{batch: Batch{entries}} of items as parts that
// are concatenated on the wire (codec.go): a one-entry batch or a frame is the item's own
// shared bytes; a longer batch is a small header followed by each entry's Batch.entries
// field, which is the tail of that entry's one-entry frame. Nothing is copied: the bytes
// are shared and immutable, like every item's.
func batchParts(items []*item) rawParts {
	if len(items) == 1 {
		if items[0].frame != nil {
			return append(make(rawParts, 0, 2), items[0].wire) // room for withHead
		}
		if items[0].single != nil {
			return append(make(rawParts, 0, 2), items[0].single)
		}
	}
	inner := 0
	for _, it := range items {
		inner += protowire.SizeTag(wire.BatchEntries) + protowire.SizeBytes(len(it.wire))
	}
	hdr := make([]byte, 0, protowire.SizeTag(wire.SubscribeResponseBatch)+protowire.SizeVarint(uint64(inner)))
	hdr = protowire.AppendTag(hdr, wire.SubscribeResponseBatch, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(inner))
	parts := make(rawParts, 1, 2+len(items)) // header, entries, room for withHead
	parts[0] = hdr
	for _, it := range items {
		parts = append(parts, it.entryField())
	}
	return parts
}

// entryField returns the Batch.entries field (tag, length, Entry bytes) of an entry item:
// the tail of its one-entry frame, or a fresh copy when it has none.
func (it *item) entryField() []byte {
	n := protowire.SizeTag(wire.BatchEntries) + protowire.SizeVarint(uint64(len(it.wire)))
	if len(it.single) >= n+len(it.wire) {
		return it.single[len(it.single)-len(it.wire)-n:]
	}
	b := make([]byte, 0, n+len(it.wire))
	b = protowire.AppendTag(b, wire.BatchEntries, protowire.BytesType)
	return protowire.AppendBytes(b, it.wire)
}

// withHead appends SubscribeResponse.head_index to the message in parts (a top-level
// field after the oneof: protobuf lets a message's fields come in any order). Nothing
// before it is touched, so the entries' shared bytes stay shared.
func withHead(parts rawParts, head int64) rawParts {
	if head <= 0 {
		return parts
	}
	b := make([]byte, 0, protowire.SizeTag(wire.SubscribeResponseHeadIndex)+protowire.SizeVarint(uint64(head)))
	b = protowire.AppendTag(b, wire.SubscribeResponseHeadIndex, protowire.VarintType)
	return append(parts, protowire.AppendVarint(b, uint64(head)))
}

// encodeBatch is batchParts concatenated into one buffer (tests).
func encodeBatch(items []*item) []byte {
	return slices.Concat(batchParts(items)...)
}

// encodeProgress returns a marshalled SubscribeResponse{progress: {index}, topic_id}.
func encodeProgress(index int64, topic []byte) []byte {
	b, _ := proto.Marshal(&statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_Progress{Progress: &statecastv1.Progress{Index: index}}, TopicId: topic})
	return b
}
