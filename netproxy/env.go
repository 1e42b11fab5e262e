package netproxy

import "strings"

// Env returns the proxy variables a sandboxed command gets in allow mode,
// upper and lower case (programs disagree on which they read). ALL_PROXY
// uses socks5h:// so names go to the proxy unresolved: the sandbox has no
// DNS. Loopback stays direct: it is the sandbox's own.
func Env(httpAddr, socksAddr string) []string {
	vars := [][2]string{
		{"HTTP_PROXY", "http://" + httpAddr},
		{"HTTPS_PROXY", "http://" + httpAddr},
		{"ALL_PROXY", "socks5h://" + socksAddr},
		{"NO_PROXY", "localhost,127.0.0.1,::1"},
	}
	var env []string
	for _, v := range vars {
		env = append(env, v[0]+"="+v[1], strings.ToLower(v[0])+"="+v[1])
	}
	return env
}
