// Package units parses the sizes and ages people type in flags and the
// host config file.
package units

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSize reads 1024, 64K, 512M, 1.5G, 1T (powers of 1024; a trailing B
// or iB is allowed).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "IB"), "B")
	mult := int64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGT", s[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(v * float64(mult)), nil
}

// ParseAge is time.ParseDuration plus whole days (7d) and weeks (2w); the
// result is positive.
func ParseAge(s string) (time.Duration, error) {
	units := []struct {
		suffix, name string
		d            time.Duration
	}{{"d", "days", 24 * time.Hour}, {"w", "weeks", 7 * 24 * time.Hour}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v <= 0 || v > 100000 {
				return 0, fmt.Errorf("want a positive number of %s", u.name)
			}
			return time.Duration(v) * u.d, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive duration such as 36h, 7d or 2w")
	}
	return d, nil
}

// FormatSize is n bytes for people, in powers of 1024: "512 B", "3.4 MiB"
// (what ParseSize reads back, to a tenth).
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
