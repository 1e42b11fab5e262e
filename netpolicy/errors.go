package netpolicy

import "github.com/artrt/art/internal/errclass"

// ErrBadRule is returned (wrapped, with the rule's text) for an --allow or
// --deny entry that does not parse.
var ErrBadRule = errclass.New(errclass.Invalid, "bad network rule")

// ErrBadConfig is returned (wrapped, with the file's path) for a config file
// that is not valid JSON of the documented shape.
var ErrBadConfig = errclass.New(errclass.Invalid, "bad config file")
