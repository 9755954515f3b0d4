// Package wire names the protobuf field numbers of the player protocol
// (schemas/proto/statecast/v1/player.proto) for the code that writes or reads its messages
// by hand: the player's batch encoder and cacheclient's frame decoder, which avoid the
// generated code's allocation per entry. Both take every field number from here, so the
// .proto and this file are the only two places that spell them, and a test checks this
// file against the generated descriptors: renumbering, retyping, adding or removing a
// field of these messages in the .proto fails that test until this file (and the code
// that uses it) follows.
//
// Enum values are not repeated here: hand-written code uses the generated constants
// (statecastv1.Kind_KIND_ROW, …).
//
// The package depends on protowire only, so the embedded cacheclient can import it.
package wire

import "google.golang.org/protobuf/encoding/protowire"

// Fields of statecast.v1.SubscribeResponse. The first five are the members of its oneof
// msg, each a message (wire type bytes).
const (
	SubscribeResponseBatch          protowire.Number = 1  // Batch, bytes
	SubscribeResponseProgress       protowire.Number = 2  // Progress, bytes
	SubscribeResponseSnapshotBegin  protowire.Number = 3  // SnapshotBegin, bytes
	SubscribeResponseSnapshotEnd    protowire.Number = 4  // SnapshotEnd, bytes
	SubscribeResponseResyncRequired protowire.Number = 5  // ResyncRequired, bytes
	SubscribeResponseHeadIndex      protowire.Number = 10 // int64, varint
	SubscribeResponseTopicID        protowire.Number = 11 // bytes
)

// Fields of statecast.v1.SubscribeManyResponse: the player writes a channel's frames as
// the channel and the SubscribeResponse's bytes, which it marshalled once for all targets.
const (
	SubscribeManyResponseChannel  protowire.Number = 1 // uint32, varint
	SubscribeManyResponseResponse protowire.Number = 2 // SubscribeResponse, bytes
	SubscribeManyResponseEnd      protowire.Number = 3 // ChannelEnd, bytes
)

// Fields of statecast.v1.Batch.
const (
	BatchEntries protowire.Number = 1 // repeated Entry, bytes
)

// Fields of statecast.v1.Entry.
const (
	EntryIndex      protowire.Number = 1  // int64, varint
	EntryKey        protowire.Number = 2  // bytes
	EntryValue      protowire.Number = 3  // bytes
	EntryTombstone  protowire.Number = 4  // bool, varint
	EntryView       protowire.Number = 5  // string, bytes
	EntryKind       protowire.Number = 6  // Kind, varint
	EntryEpoch      protowire.Number = 7  // int64, varint
	EntrySourceTime protowire.Number = 8  // google.protobuf.Timestamp, bytes
	EntrySourceLSN  protowire.Number = 9  // string, bytes
	EntryTxn        protowire.Number = 10 // bool, varint
)

// Fields of statecast.v1.Progress.
const (
	ProgressIndex protowire.Number = 1 // int64, varint
)

// Fields of statecast.v1.SnapshotBegin.
const (
	SnapshotBeginIndex protowire.Number = 1 // int64, varint
	SnapshotBeginViews protowire.Number = 2 // repeated string, bytes
)

// Fields of statecast.v1.SnapshotEnd.
const (
	SnapshotEndIndex protowire.Number = 1 // int64, varint
)

// Fields of statecast.v1.ResyncRequired.
const (
	ResyncRequiredReason   protowire.Number = 1 // ResyncRequired.Reason, varint
	ResyncRequiredDetail   protowire.Number = 2 // string, bytes
	ResyncRequiredLogStart protowire.Number = 3 // int64, varint
)

// Fields of google.protobuf.Timestamp (Entry.source_time).
const (
	TimestampSeconds protowire.Number = 1 // int64, varint
	TimestampNanos   protowire.Number = 2 // int32, varint
)
