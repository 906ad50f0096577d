package transport

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/sluice-rl/sluice/internal/wire"
)

// ErrInvalidConfig wraps every configuration error of the package.
var ErrInvalidConfig = errors.New("transport: invalid config")

// FlowWindow is wire.FlowWindow.
const FlowWindow = wire.FlowWindow

// protoFieldError names a field of a peer message that failed to convert.
type protoFieldError struct{ Field, Reason string }

func itemCode(err error) codes.Code { return wire.ItemCode(err) }

type nopObserver struct{}

func (nopObserver) Observe(float64) {}
