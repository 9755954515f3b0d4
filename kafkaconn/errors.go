package kafkaconn

import "errors"

// ErrConfig is wrapped by every error of Config.Validate: a setting of the connection is
// invalid, or one of its TLS files does not load. A component that embeds a Config wraps
// its own sentinel around it, so errors.Is finds both.
var ErrConfig = errors.New("kafkaconn: invalid config")
