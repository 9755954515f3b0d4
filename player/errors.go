package player

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinels returned (wrapped) by the player and mapped to gRPC codes by StatusTable.
var (
	ErrBadHello          = errors.New("player: bad hello")
	ErrBadAck            = errors.New("player: bad ack")
	ErrUnknownStream     = errors.New("player: unknown stream")
	ErrAckTimeout        = errors.New("player: ack timeout")
	ErrSuspended         = errors.New("player: target suspended")
	ErrClosed            = errors.New("player: closed")
	ErrStreamUnavailable = errors.New("player: stream unavailable")
	ErrConfig            = errors.New("player: invalid config")
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
	{ErrAckTimeout, codes.DeadlineExceeded},
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
