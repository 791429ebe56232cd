package jsonstring

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		in   string
		r    rune
		n    int
		err  error
		note string
	}{
		{`\"`, '"', 2, nil, "quote"},
		{`\\`, '\\', 2, nil, "backslash"},
		{`\/`, '/', 2, nil, "solidus"},
		{`\b`, '\b', 2, nil, ""},
		{`\f`, '\f', 2, nil, ""},
		{`\n`, '\n', 2, nil, ""},
		{`\r`, '\r', 2, nil, ""},
		{`\tx`, '\t', 2, nil, "what follows is not read"},
		{`\u00e9`, 'é', 6, nil, "lower-case hex"},
		{`\u00E9`, 'é', 6, nil, "upper-case hex"},
		{`\u0000`, 0, 6, nil, "NUL"},
		{`\ud83d\ude00`, '😀', 12, nil, "a surrogate pair is one code point"},
		{`\uD83D\uDE00`, '😀', 12, nil, "upper-case pair"},
		{`\ud83d`, 0xD83D, 6, nil, "a lone high surrogate is left to the caller"},
		{`\ude00`, 0xDE00, 6, nil, "a lone low surrogate"},
		{`\ude00\ud83d`, 0xDE00, 6, nil, "low then high is no pair"},
		{`\ud83d\ud83d`, 0xD83D, 6, nil, "high then high is no pair"},
		{`\ud83d\u0041`, 0xD83D, 6, nil, "high then no surrogate"},
		{`\ud83d\uzzzz`, 0xD83D, 6, nil, "a bad escape after a high one is the next one's"},
		{`\ud83d\n`, 0xD83D, 6, nil, ""},
		{`\`, 0, 0, ErrUnterminated, "a lone backslash"},
		{`\x41`, 0, 0, ErrInvalid, "not a JSON escape"},
		{`\U00e9`, 0, 0, ErrInvalid, "upper-case U"},
		{`\'`, 0, 0, ErrInvalid, ""},
		{`\u00e`, 0, 0, ErrHex, "three digits"},
		{`\u00g9`, 0, 0, ErrHex, "not hex"},
		{`\u+0e9`, 0, 0, ErrHex, "a sign is not a digit"},
	} {
		r, n, err := Decode([]byte(tt.in))
		if r != tt.r || n != tt.n || !errors.Is(err, tt.err) {
			t.Errorf("Decode(%q) = %U, %d, %v; want %U, %d, %v (%s)", tt.in, r, n, err, tt.r, tt.n, tt.err, tt.note)
		}
	}
}

func TestUnquote(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{`""`, "", true},
		{`"plain"`, "plain", true},
		{`"Отчёт 中文"`, "Отчёт 中文", true},
		{`"a\"b\\c\/d"`, `a"b\c/d`, true},
		{`"\u00e9\ud83d\ude00"`, "é😀", true},
		{`"\ud83d"`, "\uFFFD", true},
		{`"\ud83dx"`, "\uFFFDx", true},
		{`"\ud83d\ud83d\ude00"`, "\uFFFD😀", true},
		{`"\ud800\udc00"`, "\U00010000", true},   // the lowest low surrogate
		{`"\udbff\udfff"`, "\U0010FFFF", true},   // the highest of both
		{`"\udc00\udc00"`, "\uFFFD\uFFFD", true}, // a low surrogate is no high one
		{`"\ud800\"dc00"`, "\uFFFD\"dc00", true}, // no pair without a second \u
		{"\"\x1f\"", "", false},                  // the highest control character
		{"\"\\n\x1f\"", "", false},               // and past an escape
		{"\"\xff\"", "\uFFFD", true},
		{"\"a\xe2\x82\"", "a\uFFFD\uFFFD", true},
		{"\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD", true},
		{"\"\x7f\"", "\x7f", true},
		{"\"a\nb\"", "", false},
		{"\"\x00\"", "", false},
		{`"a"b"`, "", false},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{`"abc`, "", false},
		{`abc"`, "", false},
		{`"`, "", false},
		{` "a"`, "", false},
		{``, "", false},
	} {
		got, err := Unquote([]byte(tt.in))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("Unquote(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok {
			if msg := againstJSON(Unquote, []byte(tt.in)); msg != "" {
				t.Error(msg)
			}
		}
	}
}

// againstJSON compares unquote with encoding/json on q, one string literal,
// and returns what differs, or "".
func againstJSON(unquote func([]byte) (string, error), q []byte) string {
	got, err := unquote(q)
	var want string
	jerr := json.Unmarshal(q, &want)
	if strings.TrimSpace(string(q)) != string(q) && jerr == nil {
		return "" // encoding/json allows white space around the value; Unquote does not
	}
	switch {
	case (err == nil) != (jerr == nil):
		return "Unquote(" + strconvQuote(q) + "): error " + errText(err) + ", encoding/json: " + errText(jerr)
	case got != want:
		return "Unquote(" + strconvQuote(q) + ") = " + strconvQuote([]byte(got)) + ", encoding/json reads " + strconvQuote([]byte(want))
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

func strconvQuote(b []byte) string {
	q, _ := json.Marshal(string(b))
	if !utf8.Valid(b) {
		return "(not UTF-8) " + string(q)
	}
	return string(q)
}

// FuzzUnquote compares Unquote with encoding/json on a string literal made
// of the fuzzed body, and on the fuzzed bytes as they are.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{"", "a", `\"`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00\ud83d`, "\xff", "\xed\xa0\x80", `\u`, `\`, "\n", `"`, `\/`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, q := range []string{`"` + body + `"`, body} {
			if msg := againstJSON(Unquote, []byte(q)); msg != "" {
				t.Fatal(msg)
			}
			if utf8.ValidString(q) {
				if msg := againstJSON(UnquoteUTF8, []byte(q)); msg != "" {
					t.Fatal("UTF-8: " + msg)
				}
			}
		}
	})
}

// TestAgainstJSONCatchesWrongDecoder is the negative control of the
// comparison FuzzUnquote makes: an unquoter that keeps a lone surrogate as
// its three WTF-8 bytes, not U+FFFD, and one that takes any \u pair as a
// pair, must each differ from encoding/json on the seeds.
func TestAgainstJSONCatchesWrongDecoder(t *testing.T) {
	wtf8 := func(q []byte) (string, error) {
		s, err := Unquote(q)
		if err != nil {
			return s, err
		}
		var out []byte
		body := q[1 : len(q)-1]
		for i := 0; i < len(body); {
			if body[i] == '\\' {
				r, n, _ := Decode(body[i:])
				if utf16.IsSurrogate(r) {
					out = append(out, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
				} else {
					out = utf8.AppendRune(out, r)
				}
				i += n
				continue
			}
			out = append(out, body[i])
			i++
		}
		return string(out), nil
	}
	anyPair := func(q []byte) (string, error) {
		s, err := Unquote(q)
		return strings.ReplaceAll(s, "\uFFFD\uFFFD", "\uFFFD"), err
	}
	seeds := []string{`"\ud83d"`, `"\ude00\ud83d"`, `"a\u00e9"`}
	for name, wrong := range map[string]func([]byte) (string, error){"wtf8": wtf8, "any-pair": anyPair} {
		caught := false
		for _, q := range seeds {
			if againstJSON(Unquote, []byte(q)) != "" {
				t.Fatalf("Unquote itself differs on %s", q)
			}
			caught = caught || againstJSON(wrong, []byte(q)) != ""
		}
		if !caught {
			t.Errorf("the %s unquoter went unnoticed: the comparison cannot fail", name)
		}
	}
}

// TestPlain checks the eight-bytes-at-a-time scan against the byte loop at
// every position of every byte value.
func TestPlain(t *testing.T) {
	base := []byte(strings.Repeat("abcdéfgh", 3))
	for pos := range base {
		for c := 0; c < 256; c++ {
			b := append([]byte(nil), base...)
			b[pos] = byte(c)
			want := true
			for _, x := range b {
				want = want && x >= 0x20 && x != '"' && x != '\\'
			}
			if got := plain(b); got != want {
				t.Fatalf("plain(%q) = %v, want %v", b, got, want)
			}
		}
	}
}

func BenchmarkUnquoteMiB(b *testing.B) {
	q := []byte(`"` + strings.Repeat("Отчёт résumé Ελληνικά 中文文本 ", 1<<20/50) + `"`)
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		if _, err := UnquoteUTF8(q); err != nil {
			b.Fatal(err)
		}
	}
}
