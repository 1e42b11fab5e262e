package netpolicy

import "github.com/artrt/art/internal/errclass"

// ErrBadRule is returned (wrapped, with the rule's text) for an --allow or
// --deny entry that does not parse.
var ErrBadRule = errclass.New(errclass.Invalid, "bad network rule")
