package netpolicy

import "errors"

// ErrBadRule is returned (wrapped, with the rule's text) for an --allow or
// --deny entry that does not parse.
var ErrBadRule = errors.New("bad network rule")
