package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// field is what the hand-written code assumes of one constant: the field it names, its
// protobuf kind (which fixes the wire type and the varint's meaning: an int64 turned
// sint64 would decode wrongly) and whether it repeats.
type field struct {
	name     string // the constant's name in wire.go
	num      protowire.Number
	msg      protoreflect.MessageDescriptor
	field    protoreflect.Name
	kind     protoreflect.Kind
	repeated bool
}

func fields() []field {
	resp := (&statecastv1.SubscribeResponse{}).ProtoReflect().Descriptor()
	many := (&statecastv1.SubscribeManyResponse{}).ProtoReflect().Descriptor()
	batch := (&statecastv1.Batch{}).ProtoReflect().Descriptor()
	entry := (&statecastv1.Entry{}).ProtoReflect().Descriptor()
	progress := (&statecastv1.Progress{}).ProtoReflect().Descriptor()
	begin := (&statecastv1.SnapshotBegin{}).ProtoReflect().Descriptor()
	end := (&statecastv1.SnapshotEnd{}).ProtoReflect().Descriptor()
	resync := (&statecastv1.ResyncRequired{}).ProtoReflect().Descriptor()
	ts := (&timestamppb.Timestamp{}).ProtoReflect().Descriptor()
	const (
		msgK   = protoreflect.MessageKind
		int64K = protoreflect.Int64Kind
		bytesK = protoreflect.BytesKind
		strK   = protoreflect.StringKind
	)
	return []field{
		{"SubscribeResponseBatch", SubscribeResponseBatch, resp, "batch", msgK, false},
		{"SubscribeResponseProgress", SubscribeResponseProgress, resp, "progress", msgK, false},
		{"SubscribeResponseSnapshotBegin", SubscribeResponseSnapshotBegin, resp, "snapshot_begin", msgK, false},
		{"SubscribeResponseSnapshotEnd", SubscribeResponseSnapshotEnd, resp, "snapshot_end", msgK, false},
		{"SubscribeResponseResyncRequired", SubscribeResponseResyncRequired, resp, "resync_required", msgK, false},
		{"SubscribeResponseHeadIndex", SubscribeResponseHeadIndex, resp, "head_index", int64K, false},
		{"SubscribeResponseTopicID", SubscribeResponseTopicID, resp, "topic_id", bytesK, false},

		{"SubscribeManyResponseChannel", SubscribeManyResponseChannel, many, "channel", protoreflect.Uint32Kind, false},
		{"SubscribeManyResponseResponse", SubscribeManyResponseResponse, many, "response", msgK, false},
		{"SubscribeManyResponseEnd", SubscribeManyResponseEnd, many, "end", msgK, false},

		{"BatchEntries", BatchEntries, batch, "entries", msgK, true},

		{"EntryIndex", EntryIndex, entry, "index", int64K, false},
		{"EntryKey", EntryKey, entry, "key", bytesK, false},
		{"EntryValue", EntryValue, entry, "value", bytesK, false},
		{"EntryTombstone", EntryTombstone, entry, "tombstone", protoreflect.BoolKind, false},
		{"EntryView", EntryView, entry, "view", strK, false},
		{"EntryKind", EntryKind, entry, "kind", protoreflect.EnumKind, false},
		{"EntryEpoch", EntryEpoch, entry, "epoch", int64K, false},
		{"EntrySourceTime", EntrySourceTime, entry, "source_time", msgK, false},
		{"EntrySourceLSN", EntrySourceLSN, entry, "source_lsn", strK, false},
		{"EntryTxn", EntryTxn, entry, "txn", protoreflect.BoolKind, false},

		{"ProgressIndex", ProgressIndex, progress, "index", int64K, false},

		{"SnapshotBeginIndex", SnapshotBeginIndex, begin, "index", int64K, false},
		{"SnapshotBeginViews", SnapshotBeginViews, begin, "views", strK, true},

		{"SnapshotEndIndex", SnapshotEndIndex, end, "index", int64K, false},

		{"ResyncRequiredReason", ResyncRequiredReason, resync, "reason", protoreflect.EnumKind, false},
		{"ResyncRequiredDetail", ResyncRequiredDetail, resync, "detail", strK, false},
		{"ResyncRequiredLogStart", ResyncRequiredLogStart, resync, "log_start", int64K, false},

		{"TimestampSeconds", TimestampSeconds, ts, "seconds", int64K, false},
		{"TimestampNanos", TimestampNanos, ts, "nanos", protoreflect.Int32Kind, false},
	}
}

// TestNumbersMatchDescriptors: every constant is its field's number in the generated
// descriptor, with the kind and cardinality the hand-written code assumes.
func TestNumbersMatchDescriptors(t *testing.T) {
	for _, f := range fields() {
		fd := f.msg.Fields().ByName(f.field)
		if fd == nil {
			t.Errorf("%s: %s has no field %q", f.name, f.msg.FullName(), f.field)
			continue
		}
		if fd.Number() != f.num {
			t.Errorf("%s = %d, but %s is field %d", f.name, f.num, fd.FullName(), fd.Number())
		}
		if fd.Kind() != f.kind || fd.IsList() != f.repeated {
			t.Errorf("%s: %s is %v (repeated %v), the hand-written code reads a %v (repeated %v)",
				f.name, fd.FullName(), fd.Kind(), fd.IsList(), f.kind, f.repeated)
		}
	}
}

// TestComplete: every field of every message the hand-written code reads (SubscribeResponse
// and every message reachable from it) has a constant, so a field added to the .proto is
// not silently skipped by the decoder.
func TestComplete(t *testing.T) {
	have := map[protoreflect.FullName]bool{}
	for _, f := range fields() {
		have[f.msg.Fields().ByName(f.field).FullName()] = true
	}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			if !have[fd.FullName()] {
				t.Errorf("field %s (number %d) has no constant in package wire", fd.FullName(), fd.Number())
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk((&statecastv1.SubscribeResponse{}).ProtoReflect().Descriptor())
}

// TestTableListsEveryConstant: the table above covers every constant of wire.go, so a
// constant added without its descriptor check fails here.
func TestTableListsEveryConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "wire.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, fl := range fields() {
		listed[fl.name] = true
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, id := range s.(*ast.ValueSpec).Names {
				n++
				if !listed[id.Name] {
					t.Errorf("constant %s is not checked against the descriptors", id.Name)
				}
			}
		}
	}
	if n != len(listed) {
		t.Errorf("wire.go declares %d constants, the table lists %d names", n, len(listed))
	}
}
