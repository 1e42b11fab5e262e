package main

import (
	"slices"
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", "", "# Benchmarks\n\n" + beginMarker + "\nNEW\n" + endMarker + "\n"},
		{"no markers", "# B\n\ntext\n\n\n", "# B\n\ntext\n\n" + beginMarker + "\nNEW\n" + endMarker + "\n"},
		{"replace, keep the rest",
			"# B\nbefore\n" + beginMarker + "\nold\nlines\n" + endMarker + "\nafter\n",
			"# B\nbefore\n" + beginMarker + "\nNEW\n" + endMarker + "\nafter\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceSection([]byte(tc.doc), "NEW\n")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(got), tc.want; got != want {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
	for _, doc := range []string{"x " + beginMarker + " y", endMarker + " " + beginMarker} {
		if _, err := replaceSection([]byte(doc), "NEW"); err == nil || !strings.Contains(err.Error(), "markers") {
			t.Errorf("replaceSection(%q): err %v, want a markers error", doc, err)
		}
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
