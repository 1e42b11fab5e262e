package tracer

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestOpenFlags(t *testing.T) {
	for flags, want := range map[uint64]string{
		unix.O_RDONLY | unix.O_CLOEXEC:                "O_RDONLY|O_CLOEXEC",
		unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC:   "O_WRONLY|O_CREAT|O_TRUNC",
		unix.O_RDWR | unix.O_APPEND:                   "O_RDWR|O_APPEND",
		unix.O_WRONLY | unix.O_TMPFILE:                "O_WRONLY|O_TMPFILE",
		unix.O_RDONLY | unix.O_DIRECTORY:              "O_RDONLY|O_DIRECTORY",
		unix.O_WRONLY | unix.O_SYNC:                   "O_WRONLY|O_SYNC",
		unix.O_WRONLY | unix.O_DSYNC:                  "O_WRONLY|O_DSYNC",
		unix.O_RDONLY | 1<<30:                         "O_RDONLY|0x40000000",
		unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL:    "O_WRONLY|O_CREAT|O_EXCL",
		unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_PATH: "O_RDONLY|O_NOFOLLOW|O_PATH",
	} {
		if got := OpenFlags(flags); got != want {
			t.Errorf("OpenFlags(%#x) = %q, want %q", flags, got, want)
		}
	}
}

func sockaddr(family uint16, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint16(nil, family), rest...)
}

func TestFormatSockaddr(t *testing.T) {
	v6 := make([]byte, 22)
	v6[0], v6[1] = 0x01, 0xbb // port 443
	v6[21] = 1                // ::1 at offset 8 of the sockaddr (6 here)
	for _, c := range []struct {
		raw  []byte
		want string
	}{
		{sockaddr(unix.AF_INET, 0x00, 0x50, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0), "inet 10.0.0.1:80"},
		{sockaddr(unix.AF_INET6, v6...), "inet6 [::1]:443"},
		{sockaddr(unix.AF_UNIX, []byte("/run/x.sock\x00\x00")...), "unix /run/x.sock"},
		{sockaddr(unix.AF_UNIX, []byte("\x00abstract")...), "unix @abstract"},
		{sockaddr(unix.AF_UNIX), "unix (unnamed)"},
		{sockaddr(unix.AF_INET, 0, 80), "family 2"}, // truncated
		{sockaddr(99), "family 99"},
		{[]byte{1}, ""},
	} {
		if got := FormatSockaddr(c.raw); got != c.want {
			t.Errorf("FormatSockaddr(%x) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func FuzzFormatSockaddr(f *testing.F) {
	f.Add(sockaddr(unix.AF_INET, 0, 80, 1, 2, 3, 4))
	f.Add(sockaddr(unix.AF_INET6, make([]byte, 22)...))
	f.Add(sockaddr(unix.AF_UNIX, 0, 'a'))
	f.Fuzz(func(t *testing.T, b []byte) {
		FormatSockaddr(b) // must not panic on any bytes
	})
}

// TestRecordJSON: records survive the journal's JSON (kinds by name).
func TestRecordJSON(t *testing.T) {
	in := Record{Time: time.Unix(1, 2).UTC(), Kind: KindSyscall, PID: 3, TID: 4, PPID: 2, Syscall: "openat",
		Path: "/home/agent/f", Flags: "O_WRONLY", Ret: -1, Errno: syscall.ENOENT, Argv: []string{"a"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Kind != in.Kind || out.Errno != in.Errno || out.Path != in.Path || !slices.Equal(out.Argv, in.Argv) || !out.Time.Equal(in.Time) {
		t.Errorf("round trip: %+v, want %+v (json %s)", out, in, b)
	}
	if err := json.Unmarshal([]byte(`{"kind":"bogus"}`), &out); err == nil {
		t.Error("unknown kind accepted")
	}
}
