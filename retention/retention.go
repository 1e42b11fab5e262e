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
package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/internal/units"
	"github.com/artrt/art/journal"
)

// ErrBadConfig reports a retention section that does not parse.
var ErrBadConfig = errclass.New(errclass.Invalid, "bad retention config")

// config is the "retention" section as written.
type config struct {
	MaxStoreSize string `json:"max_store_size"`
	KeepLast     int    `json:"keep_last"`
	KeepWithin   string `json:"keep_within"`
	KeepHourly   int    `json:"keep_hourly"`
	KeepDaily    int    `json:"keep_daily"`
	KeepWeekly   int    `json:"keep_weekly"`
	KeepMonthly  int    `json:"keep_monthly"`
	Grace        string `json:"grace"`
}

// Auto is a parsed automatic retention policy; the zero value is off.
type Auto struct {
	MaxBytes int64
	Policy   journal.Retention
	Grace    time.Duration
}

// Enabled reports whether the policy applies to anything.
func (a Auto) Enabled() bool { return a.MaxBytes > 0 }

// Load reads the "retention" section of the config file at path. A missing
// file or section is the zero Auto (off). Unknown keys are an error, so a
// misspelt rule cannot silently keep less than meant; so is a size without
// a rule (it would keep nothing) and a rule without a size (it would never
// apply).
func Load(path string) (Auto, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Auto{}, nil
	}
	if err != nil {
		return Auto{}, fmt.Errorf("read config: %w", err)
	}
	var top struct {
		Retention json.RawMessage `json:"retention"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return Auto{}, fmt.Errorf("%w %s: %v", ErrBadConfig, path, err)
	}
	if len(top.Retention) == 0 || string(top.Retention) == "null" {
		return Auto{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(top.Retention))
	dec.DisallowUnknownFields()
	var c config
	if err := dec.Decode(&c); err != nil {
		return Auto{}, fmt.Errorf("%w %s: retention: %v", ErrBadConfig, path, err)
	}
	bad := func(format string, a ...any) (Auto, error) {
		return Auto{}, fmt.Errorf("%w %s: retention: %s", ErrBadConfig, path, fmt.Sprintf(format, a...))
	}
	var a Auto
	if c.MaxStoreSize != "" {
		if a.MaxBytes, err = units.ParseSize(c.MaxStoreSize); err != nil || a.MaxBytes <= 0 {
			return bad("max_store_size %q: want a positive size such as 20G", c.MaxStoreSize)
		}
	}
	for _, n := range []int{c.KeepLast, c.KeepHourly, c.KeepDaily, c.KeepWeekly, c.KeepMonthly} {
		if n < 0 {
			return bad("keep_* counts must not be negative")
		}
	}
	a.Policy = journal.Retention{Last: c.KeepLast, Hourly: c.KeepHourly, Daily: c.KeepDaily, Weekly: c.KeepWeekly, Monthly: c.KeepMonthly}
	if c.KeepWithin != "" {
		if a.Policy.Within, err = units.ParseAge(c.KeepWithin); err != nil {
			return bad("keep_within %q: %v", c.KeepWithin, err)
		}
	}
	a.Grace = time.Hour
	if c.Grace != "" {
		if a.Grace, err = time.ParseDuration(c.Grace); err != nil || a.Grace < 0 {
			return bad("grace %q: want a duration such as 1h", c.Grace)
		}
	}
	switch {
	case a.MaxBytes > 0 && a.Policy.Empty():
		return bad("max_store_size is set but no keep_* rule: it would keep no snapshot")
	case a.MaxBytes == 0 && !a.Policy.Empty():
		return bad("keep_* rules without max_store_size would never apply")
	}
	return a, nil
}

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
