package sandbox

import (
	"fmt"

	"github.com/artrt/art/internal/errclass"
)

// ErrInvalid marks a Config that cannot describe a safe sandbox (a bind
// onto /proc, a relative path...). The message names the field.
var ErrInvalid = errclass.New(errclass.Invalid, "invalid sandbox")

// ErrUnavailable is returned when bwrap (or a kernel feature a flag asks
// for) is missing on this machine.
var ErrUnavailable = errclass.New(errclass.Unavailable, "sandbox unavailable")

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}
