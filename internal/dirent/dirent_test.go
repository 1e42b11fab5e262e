package dirent

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseGetdents: what the kernel returns for a real directory parses
// into its names and types, "." and ".." left out.
func TestParseGetdents(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Getdents(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint8{}
	if err := Parse(buf[:n], func(name []byte, typ uint8) { got[string(name)] = typ }); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint8{"sub": unix.DT_DIR, "file": unix.DT_REG, "link": unix.DT_LNK}
	if len(got) != len(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	for name, typ := range want {
		if got[name] != typ {
			t.Fatalf("parsed %v, want %v", got, want)
		}
	}
}

// TestParseMalformed: a record shorter than its header, or one whose
// length runs past the buffer (or is too short to hold a name), ends the
// parse with errMalformed after the records before it.
func TestParseMalformed(t *testing.T) {
	rec := func(name string, reclen int) []byte {
		b := make([]byte, max(reclen, 19+len(name)+1))
		binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
		b[18] = unix.DT_REG
		copy(b[19:], name)
		return b[:max(reclen, 19)]
	}
	good := rec("ok", 24)
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"truncated header", append(slices.Clone(good), 1, 2, 3)},
		{"past the buffer", append(slices.Clone(good), rec("x", 64)[:24]...)},
		{"too short", append(slices.Clone(good), rec("", 19)...)},
	} {
		var names []string
		err := Parse(c.b, func(name []byte, _ uint8) { names = append(names, string(name)) })
		if !errors.Is(err, errMalformed) || !slices.Equal(names, []string{"ok"}) {
			t.Errorf("%s: names %q, error %v", c.name, names, err)
		}
	}
}
