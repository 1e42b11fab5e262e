// Package envkey says what an environment variable's name may be, for the
// sandbox's configuration and the exec API's requests alike.
package envkey

// Valid reports whether k matches [A-Za-z_][A-Za-z0-9_]*: a loop, not a
// regular expression compiled at package initialisation, which every art
// process (every verb) would pay for.
func Valid(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
