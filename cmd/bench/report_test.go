package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReplaceSection(t *testing.T) {
	b, e := storeMarkers.begin, storeMarkers.end
	ob, oe, oh := overlayMarkers.begin, overlayMarkers.end, overlayMarkers.heading
	for _, tc := range []struct {
		name string
		m    markers
		doc  string
		want string
	}{
		{"empty", storeMarkers, "", "# Benchmarks\n\n" + b + "\nNEW\n" + e + "\n"},
		{"no markers", storeMarkers, "# B\n\ntext\n\n\n", "# B\n\ntext\n\n" + b + "\nNEW\n" + e + "\n"},
		{"replace, keep the rest", storeMarkers,
			"# B\nbefore\n" + b + "\nold\nlines\n" + e + "\nafter\n",
			"# B\nbefore\n" + b + "\nNEW\n" + e + "\nafter\n"},
		{"new section under its heading", overlayMarkers,
			"# B\n" + b + "\nstore\n" + e + "\n\nnotes\n",
			"# B\n" + b + "\nstore\n" + e + "\n\nnotes\n\n" + oh + "\n\n" + ob + "\nNEW\n" + oe + "\n"},
		{"replace one section, keep the other", overlayMarkers,
			b + "\nstore\n" + e + "\nmid\n" + ob + "\nold\n" + oe + "\nafter\n",
			b + "\nstore\n" + e + "\nmid\n" + ob + "\nNEW\n" + oe + "\nafter\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceSection([]byte(tc.doc), tc.m, "NEW\n")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(got), tc.want; got != want {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
	for _, doc := range []string{"x " + b + " y", e + " " + b} {
		if _, err := replaceSection([]byte(doc), storeMarkers, "NEW"); err == nil || !strings.Contains(err.Error(), "markers") {
			t.Errorf("replaceSection(%q): err %v, want a markers error", doc, err)
		}
	}
}

func TestMountPoint(t *testing.T) {
	for line, want := range map[string]string{
		"46 27 0:43 / /tmp/ovt/mnt rw,nosuid,nodev,relatime - fuse.art art rw": "/tmp/ovt/mnt",
		`47 27 0:44 / /tmp/a\040b rw - fuse.loopback /x rw`:                    "/tmp/a b",
		"": "",
	} {
		if got := mountPoint(line); got != want {
			t.Errorf("mountPoint(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestProcCPUOfSelf(t *testing.T) {
	// Burn a little CPU so that at least one 10 ms tick is counted.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	if got := procCPU(os.Getpid()); got <= 0 {
		t.Fatalf("procCPU(self) = %v, want > 0", got)
	}
}

func TestPickFilesIsSeededAndDistinct(t *testing.T) {
	a, b := pickFiles(1000, 10, 1, 2), pickFiles(1000, 10, 1, 2)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed picked %v then %v", a, b)
	}
	if got, want := len(slices.Compact(slices.Clone(a))), 10; got != want {
		t.Fatalf("picked %d distinct files, want %d: %v", got, want, a)
	}
	if slices.Equal(a, pickFiles(1000, 10, 1, 3)) {
		t.Fatalf("rounds 2 and 3 picked the same files %v", a)
	}
	if got, want := len(pickFiles(5, 10, 1, 1)), 5; got != want {
		t.Fatalf("picked %d of 5 files, want %d", got, want)
	}
}

func TestFmtInt(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 11478: "11,478", 100000: "100,000", -1234: "-1,234"} {
		if got := fmtInt(n); got != want {
			t.Errorf("fmtInt(%d) = %q, want %q", n, got, want)
		}
	}
}
