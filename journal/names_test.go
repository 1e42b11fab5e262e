package journal

import (
	"regexp"
	"strings"
	"testing"
)

// The branch name and hex checks are loops (no regular expression compiled
// at start-up); they must accept exactly what the expressions they
// replaced accepted.
func TestBranchNameRules(t *testing.T) {
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,99}$`)
	badRE := regexp.MustCompile(`\.\.|//|/$|\.lock$`)
	hexRE := regexp.MustCompile(`^[0-9a-f]+$`)
	cases := []string{"", "a", "main", "feature/x", "a.b-c_d", "_x", ".x", "-x", "/x", "x/", "a..b", "a//b",
		"x.lock", "x.locks", "a b", "a~1", "a@b", "é", "A\x00", "abcd", "abc", "ABCD", "0123", "deadbeef", "dead/beef",
		strings.Repeat("a", 99), strings.Repeat("a", 100), strings.Repeat("a", 101), "a\n", "\na"}
	// Every one- and two-byte name over an alphabet of the edge characters.
	alpha := "aZ09_.-/@~ \x00\xff"
	for i := 0; i < len(alpha); i++ {
		cases = append(cases, alpha[i:i+1])
		for j := 0; j < len(alpha); j++ {
			cases = append(cases, alpha[i:i+1]+alpha[j:j+1])
		}
	}
	for _, name := range cases {
		want := nameRE.MatchString(name) && !badRE.MatchString(name) && !(hexRE.MatchString(name) && len(name) >= 4)
		if got := ValidBranchName(name) == nil; got != want {
			t.Errorf("ValidBranchName(%q) valid = %v, want %v", name, got, want)
		}
		if got, want := isLowerHex(name), hexRE.MatchString(name); got != want {
			t.Errorf("isLowerHex(%q) = %v, want %v", name, got, want)
		}
	}
}
