package player

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinels returned (wrapped) by the player and mapped to gRPC codes by StatusTable.
var (
	ErrBadHello      = errors.New("player: bad hello")
	ErrBadAck        = errors.New("player: bad ack")
	ErrUnknownStream = errors.New("player: unknown stream")
	ErrAckTimeout    = errors.New("player: ack timeout")
	ErrSuspended     = errors.New("player: target suspended")
	ErrClosed        = errors.New("player: closed")
	// ErrStreamUnavailable: the stream cannot be served now (its topic is missing, has
	// several partitions or cannot be read, its main fetcher stopped, the log offsets could
	// not be read); the message names the stream, the topic and why.
	ErrStreamUnavailable = errors.New("player: stream unavailable")
	ErrConfig            = errors.New("player: invalid config")
	// ErrKafkaUnreachable: Run's start-up did not reach Kafka within
	// Config.StartupTimeout, or Kafka refused it (TLS, SASL); the message names the
	// brokers. It is not a Subscribe error.
	ErrKafkaUnreachable = errors.New("player: Kafka unreachable")
	// ErrUnauthenticated: no valid bearer token or client certificate.
	ErrUnauthenticated = errors.New("player: unauthenticated")
	// ErrPermissionDenied: the principal is not granted the stream or a view (Config.Access).
	ErrPermissionDenied = errors.New("player: permission denied")
	// ErrUnknownView: a Hello names a view that the stream does not carry (neither seen in
	// its log nor declared in StreamConfig.Views).
	ErrUnknownView = errors.New("player: unknown view")
	// ErrSnapshotBudget: the snapshot a subscription needs does not fit in what pending
	// snapshots may pin (Config.MaxSnapshotBytes) now; the client retries later.
	ErrSnapshotBudget = errors.New("player: snapshot budget exhausted")
	// ErrPrincipalLimit: the principal holds as many targets as it may
	// (Config.MaxTargetsPerPrincipal); the client retries later.
	ErrPrincipalLimit = errors.New("player: the principal's target limit is reached")
	// ErrProtocolVersion: the client speaks a newer protocol version than the player
	// (Hello.protocol_version above wire.ProtocolVersion): upgrade the player.
	ErrProtocolVersion = errors.New("player: client protocol version newer than the player's")
	// ErrReceiveLimit: the client's receive limit (Hello.max_message_bytes) is below what
	// a record's frame may take (Config.MaxRecordBytes plus RecordFrameRoom): a record the
	// player serves could never reach it.
	ErrReceiveLimit = errors.New("player: the client's receive limit is below max_record_bytes")
	// errSendBlocked: a send to the client has not returned for AckTimeout (wrapped in
	// ErrAckTimeout): on a SubscribeMany stream it ends the whole stream, whose every
	// channel's frames wait behind that send.
	errSendBlocked = errors.New("a send blocked")
)

// StatusTable maps each sentinel to the gRPC code a Subscribe stream ends with
// (schemas/proto/README.md, "Errors → gRPC status codes").
var StatusTable = []struct {
	Err  error
	Code codes.Code
}{
	{ErrBadHello, codes.InvalidArgument},
	{ErrBadAck, codes.InvalidArgument},
	{ErrUnknownStream, codes.NotFound},
	{ErrUnknownView, codes.NotFound},
	{ErrProtocolVersion, codes.FailedPrecondition},
	{ErrReceiveLimit, codes.FailedPrecondition},
	{ErrUnauthenticated, codes.Unauthenticated},
	{ErrPermissionDenied, codes.PermissionDenied},
	{ErrAckTimeout, codes.DeadlineExceeded},
	{ErrSnapshotBudget, codes.ResourceExhausted},
	{ErrPrincipalLimit, codes.ResourceExhausted},
	{ErrSuspended, codes.Aborted},
	{ErrClosed, codes.Unavailable},
	{ErrStreamUnavailable, codes.Unavailable},
	{context.Canceled, codes.Canceled},
}

// toStatus converts err to a gRPC status error using StatusTable (Internal otherwise).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, row := range StatusTable {
		if errors.Is(err, row.Err) {
			return status.Error(row.Code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// ErrCheck is Check's error: a problem it found (the message lists them all). It is not a
// Subscribe error.
var ErrCheck = errors.New("player: check failed")
