// Package retention applies the host's automatic retention policy to a
// store: when the store (file, WAL, packs) passes a configured size, art forget with the
// configured rules on every branch, then art gc. It is off unless the host
// user's config file (~/.config/art/config.json) says otherwise:
//
//	{
//	  "retention": {
//	    "max_store_size": "20G",
//	    "keep_last": 10,
//	    "keep_daily": 7,
//	    "keep_within": "24h",
//	    "grace": "1h"
//	  }
//	}
//
// The file is read from the host, never from a workspace or a store: how
// much history to keep is the host user's policy, not the agent's data.
// Package hostconfig reads and parses it into an Auto.
package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/journal"
)

// ErrBadConfig reports a retention section that does not parse (package
// hostconfig wraps it with the file's path).
var ErrBadConfig = errclass.New(errclass.Invalid, "bad retention config")

// Auto is a parsed automatic retention policy; the zero value is off.
type Auto struct {
	MaxBytes int64
	Policy   journal.Retention
	Grace    time.Duration
}

// Enabled reports whether the policy applies to anything.
func (a Auto) Enabled() bool { return a.MaxBytes > 0 }

// Result is what Apply did.
type Result struct {
	StoreBytes int64                 `json:"store_bytes"` // file + WAL + packs before
	Forget     *journal.ForgetReport `json:"forget,omitempty"`
	GC         *journal.GCReport     `json:"gc,omitempty"`
}

// Applied reports whether the store was over the size and the policy ran.
func (r *Result) Applied() bool { return r != nil && r.Forget != nil }

// Apply runs the policy on db if it (file, WAL and packs) is larger than
// MaxBytes: forget on every branch, then gc with the configured grace.
// who is recorded in the forget op.
func (a Auto) Apply(ctx context.Context, db *journal.DB, who string) (*Result, error) {
	if !a.Enabled() {
		return nil, nil
	}
	res := &Result{}
	res.StoreBytes = journal.DiskBytes(db.Path())
	if res.StoreBytes <= a.MaxBytes {
		return res, nil
	}
	var err error
	if res.Forget, err = db.Forget(ctx, journal.ForgetOptions{All: true, Policy: a.Policy, Who: who + ", automatic retention"}); err != nil {
		return res, fmt.Errorf("automatic retention: %w", err)
	}
	if res.GC, err = db.GC(ctx, journal.GCOptions{Grace: a.Grace}); err != nil {
		return res, fmt.Errorf("automatic retention: %w", err)
	}
	return res, nil
}
