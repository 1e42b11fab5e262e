package envkey

import (
	"regexp"
	"testing"
)

// Valid is a loop (no regular expression compiled at start-up); it
// must accept exactly what [A-Za-z_][A-Za-z0-9_]* accepted.
func TestValid(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cases := []string{"", "A", "_", "a1", "1a", "PATH", "LD_PRELOAD", "A-B", "A B", "A=B", "é", "A\x00", "A\n"}
	alpha := "aZ09_-=. \x00\xff"
	for i := 0; i < len(alpha); i++ {
		cases = append(cases, alpha[i:i+1])
		for j := 0; j < len(alpha); j++ {
			cases = append(cases, alpha[i:i+1]+alpha[j:j+1])
		}
	}
	for _, k := range cases {
		if got, want := Valid(k), re.MatchString(k); got != want {
			t.Errorf("Valid(%q) = %v, want %v", k, got, want)
		}
	}
}
