package main

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"unicode/utf8"
)

// The daemon decodes the front's request with encoding/json: what it
// reads from appendRequest must be what it read from json.Marshal of the
// same request (the front's old encoder), for any strings - control
// characters, NULs (ProcKey has them), quotes, backslashes, characters
// beyond the BMP, U+2028, bytes that are not UTF-8 (U+FFFD either way).
func TestRequestMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"", "a", "\x00", "\"", "\\", "\n", "\x1f", "\x7f", "é", "€", "𝄞", "\u2028", "<>&", "\xff", "\xe2\x82", "\xed\xa0\x80", " ", "=", "/"}
	str := func() string {
		s := ""
		for range r.IntN(6) {
			s += pieces[r.IntN(len(pieces))]
		}
		return s
	}
	strs := func() []string {
		if r.IntN(4) == 0 {
			return nil
		}
		ss := make([]string, r.IntN(5))
		for i := range ss {
			ss[i] = str()
		}
		return ss
	}
	for i := range 3000 {
		req := request{Op: str(), Args: strs(), Env: strs(), Cwd: str(), Proc: str()}
		if r.IntN(2) == 0 {
			req.Umask = r.IntN(0o1000)
		}
		if r.IntN(2) == 0 {
			req.SigIgn = r.Uint64()
		}
		if r.IntN(2) == 0 {
			req.Signal = r.IntN(65) - 1
		}
		old, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var want, got request
		if err := json.Unmarshal(old, &want); err != nil {
			t.Fatal(err)
		}
		enc := appendRequest(nil, req)
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("case %d: %s: %v", i, enc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: the daemon reads\n%#v\nwhere it read\n%#v\n(%s against %s)", i, got, want, enc, old)
		}
	}
}

// checkReply holds parseReply to encoding/json's decoding of the same
// bytes into reply: both refuse, or both read the same fields (a string
// that is not UTF-8 is U+FFFD there and its bytes here: only whether it
// is empty is compared then).
func checkReply(t *testing.T, b []byte) {
	t.Helper()
	var want reply
	werr := json.Unmarshal(b, &want)
	got, gerr := parseReply(b)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: parseReply error %v, encoding/json error %v", b, gerr, werr)
	}
	if werr != nil {
		return
	}
	same := func(g, w string) bool {
		if utf8.ValidString(g) {
			return g == w
		}
		return (g == "") == (w == "")
	}
	if !same(got.Fallback, want.Fallback) || !same(got.Error, want.Error) || got.Code != want.Code {
		t.Fatalf("%q: parseReply read %#v, encoding/json %#v", b, got, want)
	}
}

var replySeeds = []string{
	`{}`, ` { } `, `{"code":3}`, `{"fallback":"no sandbox started ahead"}`, `{"error":"x","code":0}`,
	`{"snapshot":{"id":"","seq":0,"branch":"","root":""},"code":17}`,
	`{"snapshot":{"a":[1,2,{"b":null}],"c":true,"d":false,"e":-1.5e-3},"code":-2}`,
	`{"Fallback":"a"}`, `{"FALLBACK":"a","fallback":""}`, `{"code":1,"code":2}`, `{"fallback":null}`, `{"code":null}`,
	`{"fallback":"\u0000"}`, `{"error":"\ud83d\ude00"}`, `{"error":"\ud83d"}`, `{"error":"\ud83dx"}`, `{"fall\u0062ack":"z"}`,
	`{"error":"a\"b\\c\/d\b\f\n\r\t"}`,
	`{"code":1.0}`, `{"code":1e2}`, `{"code":"1"}`, `{"code":01}`, `{"code":-0}`, `{"code":99999999999999999999}`,
	`{"fallback":1}`, `{"error":true}`, `{"x":01}`, `{"x":1.}`, `{"x":.5}`, `{"x":-}`, `{"x":+1}`, `{"x":tru}`,
	`{"code":1,}`, `{,}`, `{"a" "b"}`, `{"a":1 "b":2}`, `["code",1]`, `null`, `"x"`, `1`, ``, ` `, `{`, `{"a":[}`,
	`{"a":[1,]}`, `{"a":{"b":1,}}`, `{"a":"` + "\x01" + `"}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"error":"` + "\xff\xfe" + `"}`,
	`{"code":2} x`, `{"code":2}{}`, "{\"code\":2}\n", "\t{\r\n\"code\"\t:\n4}\n",
}

func TestParseReply(t *testing.T) {
	for _, s := range replySeeds {
		checkReply(t, []byte(s))
	}
	deep := ""
	for range maxDepth + 10 {
		deep = `{"a":` + deep
	}
	if _, err := parseReply([]byte(deep + "1" + func() string {
		s := ""
		for range maxDepth + 10 {
			s += "}"
		}
		return s
	}())); err == nil {
		t.Errorf("a value nested %d deep was read", maxDepth+10)
	}
}

func FuzzReply(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		// Nesting past maxDepth is refused here, not by encoding/json
		// (whose limit is 10,000): the daemon never nests so deep.
		depth, deepest := 0, 0
		for _, c := range b {
			switch c {
			case '{', '[':
				depth++
				deepest = max(deepest, depth)
			case '}', ']':
				depth--
			}
		}
		if deepest > maxDepth/2 {
			return
		}
		checkReply(t, b)
	})
}
