package sandbox

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a Config that cannot describe a safe sandbox (a bind
// onto /proc, a relative path...). The message names the field.
var ErrInvalid = errors.New("invalid sandbox")

// ErrUnavailable is returned when bwrap (or a kernel feature a flag asks
// for) is missing on this machine.
var ErrUnavailable = errors.New("sandbox unavailable")

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}
