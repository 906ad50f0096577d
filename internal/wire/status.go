package wire

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/store"
)

// FieldError names a field of a wire message that failed to convert, and
// why. Field is a path relative to the message converted ("limit.period");
// the caller prefixes it with where the message sits ("items[3].").
type FieldError struct{ Field, Reason string }

// InvalidArgument builds an InvalidArgument status naming field, with a
// BadRequest detail so that clients can read the field without parsing the
// message.
func InvalidArgument(field, reason string) error {
	st := status.New(codes.InvalidArgument, field+": "+reason)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: reason}}}); err == nil {
		st = d
	}
	return st.Err()
}

// ItemCode maps a per-item decision error to a gRPC code: a full store is
// ResourceExhausted, a cost the limit can never allow is InvalidArgument,
// anything else Internal.
func ItemCode(err error) codes.Code {
	switch {
	case errors.Is(err, store.ErrFull):
		return codes.ResourceExhausted
	case errors.Is(err, bucket.ErrCostExceedsCapacity), errors.Is(err, bucket.ErrNegativeCost):
		return codes.InvalidArgument
	default:
		return codes.Internal
	}
}
