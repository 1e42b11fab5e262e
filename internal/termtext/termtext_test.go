package termtext

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile holds the names issue 29 was shown with, and the bytes a terminal
// acts on.
var hostile = []string{
	"evil\x1b]0;pwned\a", "red\x1b[31mX", "new\nline", "bad\xff\xfe", "csi\xc2\x9b2J", "raw\x9b2J",
	"del\x7f", "tab\there", "cr\rover", "bidi\u202eexe.txt", "nul\x00x",
}

// terminalSafe: no C0 byte, no DEL, no C1 (as a rune, or as a byte outside
// a UTF-8 sequence: invalid UTF-8), no bidi override, one line. (0x9b inside
// a valid sequence, as in "Л", is a continuation byte, not a CSI.)
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 || c == 0x7f {
			t.Errorf("%s: %q holds byte %#x", what, out, c)
		}
	}
	for i, r := range out {
		if r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD") {
			t.Errorf("%s: %q holds invalid UTF-8 at %d", what, out, i)
		}
		if r >= 0x80 && r <= 0x9f || r == 0x202e {
			t.Errorf("%s: %q holds rune %U", what, out, r)
		}
	}
}

func TestHostileTextEscaped(t *testing.T) {
	for _, s := range hostile {
		terminalSafe(t, "Quote", Quote(s))
		terminalSafe(t, "Text", Text(s))
		terminalSafe(t, "Argv", Argv([]string{"sh", "-c", s}))
		if Safe(s) {
			t.Errorf("Safe(%q) = true", s)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain/path.go", "plain/path.go"},
		{"with space", "with space"},
		{"héllo", "héllo"},
		{`back\slash`, `back\slash`},
		{"evil\x1b]0;pwned\a", `"evil\033]0;pwned\a"`},
		{"new\nline", `"new\nline"`},
		{"bad\xff\xfe", `"bad\xff\xfe"`},
		{"q\"\\\n", `"q\"\\\n"`},
		{"csi\xc2\x9b", `"csi\302\233"`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got, want := Text("msg\nsecond"), `msg\nsecond`; got != want {
		t.Errorf("Text = %s, want %s", got, want)
	}
}

// TestArgvRoundTrip: what Argv prints, bash reads back as the same words.
func TestArgvRoundTrip(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	words := append([]string{"echo", "it's", "", "a b", `x\y`, "ok-1.go"}, hostile[:len(hostile)-1]...) // bash cannot hold NUL
	line := Argv(words)
	out, err := exec.Command(bash, "-c", `for w in `+line+`; do printf '%s\0' "$w"; done`).Output()
	if err != nil {
		t.Fatalf("bash -c %s: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(words) {
		t.Fatalf("bash read %d words from %s, want %d", len(got), line, len(words))
	}
	for i := range words {
		if got[i] != words[i] {
			t.Errorf("word %d: bash read %q from %s, want %q", i, got[i], line, words[i])
		}
	}
}

func TestQuotedAndContent(t *testing.T) {
	for _, c := range []struct{ in, quoted, content string }{
		{"fix the parser", `"fix the parser"`, "fix the parser"},
		{`say "hi" \o/`, `"say \"hi\" \\o/"`, `say "hi" \o/`},
		{"a\tb\x1b]0;x\a", `"a\tb\033]0;x\a"`, "a\tb\\033]0;x\\a"},
		{"crlf\r", `"crlf\r"`, `crlf\r`},
		{"bad\xff", `"bad\xff"`, `bad\xff`},
	} {
		if got := Quoted(c.in); got != c.quoted {
			t.Errorf("Quoted(%q) = %s, want %s", c.in, got, c.quoted)
		}
		if got := Content(c.in); got != c.content {
			t.Errorf("Content(%q) = %s, want %s", c.in, got, c.content)
		}
	}
	for _, s := range hostile {
		terminalSafe(t, "Quoted", Quoted(s))
		got := Content(s)
		for i := 0; i < len(got); i++ {
			if c := got[i]; c < 0x20 && c != '\t' || c == 0x7f || c == 0x9b {
				t.Errorf("Content(%q) = %q holds byte %#x", s, got, c)
			}
		}
	}
}

// FuzzSafeOutput: whatever the input, no function lets an unsafe byte or
// character through (Content keeps tabs), and all of it stays one line.
func FuzzSafeOutput(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Add("a\tb\\c\"d'e")
	f.Fuzz(func(t *testing.T, s string) {
		for what, out := range map[string]string{"Quote": Quote(s), "Quoted": Quoted(s), "Text": Text(s), "Argv": Argv([]string{s, s})} {
			terminalSafe(t, what, out)
			if !utf8.ValidString(out) {
				t.Errorf("%s(%q) = %q: invalid UTF-8", what, s, out)
			}
		}
		c := Content(s)
		if !utf8.ValidString(c) || !Safe(strings.ReplaceAll(c, "\t", " ")) {
			t.Errorf("Content(%q) = %q", s, c)
		}
	})
}
