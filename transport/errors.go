package transport

import "errors"

// ErrInvalidConfig wraps every configuration error of the package.
var ErrInvalidConfig = errors.New("transport: invalid config")
