package requeststate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestArgumentsDigestEqual(t *testing.T) {
	same := [][]string{
		{"", "null", "{}", " null ", "{ }", "\t{\r\n}\n"},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, ` { "b" : 2 , "a" : 1 } `, "{\n\"a\":1,\n\"b\":2\n}"},
		{`{"o":{"y":[1,{"q":1,"p":2}],"x":true}}`, `{"o":{"x":true,"y":[1,{"p":2,"q":1}]}}`},
		{`{"s":"a"}`, `{"s":"\u0061"}`, `{"\u0073":"a"}`},
		{`{"s":"/"}`, `{"s":"\/"}`, `{"s":"\u002f"}`},
		{`{"s":"😀"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\uD83D\uDE00"}`},
		{`{"s":"é"}`, `{"s":"\u00e9"}`, `{"s":"\u00E9"}`},
		{`{"s":"\n"}`, `{"s":"\u000a"}`, `{"s":"\u000A"}`},
		{`{"s":"\ud800"}`, `{"s":"\uD800"}`},
		{"{\"s\":\"\uFFFD\"}", `{"s":"\ufffd"}`},
		{"{\"s\":\"\xff\"}", "{\"s\":\"\xff\"}"},
		{`{"n":10000000000000000000001}`, ` {"n" : 10000000000000000000001}`},
		{`[1,2]`, `[ 1 , 2 ]`},
	}
	for _, group := range same {
		want, err := ArgumentsDigest([]byte(group[0]))
		if err != nil {
			t.Fatalf("%q: %v", group[0], err)
		}
		if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
			t.Fatalf("digest %q is not 64 lower-case hex digits", want)
		}
		for _, in := range group[1:] {
			got, err := ArgumentsDigest([]byte(in))
			if err != nil || got != want {
				t.Errorf("digest(%q) = %s, %v; want digest(%q) = %s", in, got, err, group[0], want)
			}
		}
	}
}

func TestArgumentsDigestDistinct(t *testing.T) {
	// Every input in this list means something different from every other.
	distinct := []string{
		`{}`, `[]`, `""`, `0`, `false`, `{"a":null}`, `{"a":{}}`, `{"a":[]}`,
		`{"n":10000000000000000000001}`, `{"n":1e22}`, `{"n":1E22}`, `{"n":1e+22}`, `{"n":10000000000000000000000}`,
		`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":-0}`, `{"n":0}`, `{"n":"1"}`,
		`{"s":"\ud800"}`, `{"s":"\udc00"}`, `{"s":"\ufffd"}`, "{\"s\":\"\xff\"}", "{\"s\":\"\xfe\"}", "{\"s\":\"\xed\xa0\x80\"}",
		`{"s":"\ud800\ud800"}`, `{"s":"\udc00\ud800"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\ud83d\\ude00"}`,
		`{"s":"a"}`, `{"s":"A"}`, `{"s":"a "}`, `{"s":"\u0000"}`, `{"s":""}`,
		`{"a":1,"b":2}`, `{"a":2,"b":1}`, `{"ab":1}`, `{"a":{"b":1}}`,
		`[1,2]`, `[2,1]`, `[[1],2]`, `[1,[2]]`,
		`{"\ud800":1}`, `{"\ufffd":1}`,
	}
	seen := map[string]string{}
	for _, in := range distinct {
		d, err := ArgumentsDigest([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if prev, ok := seen[d]; ok {
			t.Errorf("%q and %q share a digest", prev, in)
		}
		seen[d] = in
	}
}

// TestEncodingJSONCollapses is the known-broken control: decoding with
// encoding/json (into any) makes arguments that TestArgumentsDigestDistinct
// keeps apart look equal, which is why the digest does not use it.
func TestEncodingJSONCollapses(t *testing.T) {
	naive := func(s string) string {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	for _, pair := range [][2]string{
		{`{"n":10000000000000000000001}`, `{"n":1e22}`},
		{`{"s":"\ud800"}`, `{"s":"\ufffd"}`},
		{"{\"s\":\"\xff\"}", `{"s":"\ufffd"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
	} {
		if naive(pair[0]) != naive(pair[1]) {
			t.Errorf("encoding/json keeps %q and %q apart; control is stale", pair[0], pair[1])
		}
		d0, err0 := ArgumentsDigest([]byte(pair[0]))
		d1, _ := ArgumentsDigest([]byte(pair[1]))
		if err0 == nil && d0 == d1 {
			t.Errorf("ArgumentsDigest collapses %q and %q", pair[0], pair[1])
		}
	}
}

func TestArgumentsDigestRejects(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	bad := []string{
		// duplicates, by decoded value
		`{"a":1,"a":2}`, `{"a":1,"a":1}`, `{"a":1,"\u0061":2}`, `{"x":{"b":1,"c":2,"b":3}}`,
		`[{"k":1,"k":2}]`, `{"\ud800":1,"\uD800":2}`, `{"😀":1,"\ud83d\ude00":2}`,
		// trailing data
		`{} {}`, `{}x`, `1 2`, `null null`, `{}]`, "{}\x00",
		// invalid JSON
		" ", "\n", `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a" 1}`, `{1:2}`, `{a:1}`,
		`01`, `-`, `-01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`, `tru`, `nul`, `True`,
		"\"\x01\"", "\"\x1f\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"\`, `"abc`, `'a'`, "\"a\"\"b\"",
		"\xef\xbb\xbf{}", // byte-order mark
		// a control byte after other bytes; a literal right only in its first byte
		"\"a\x01\"", "\"\u00e9\x1fb\"", `[trux]`, `{"a":fals3}`, `[nulL]`,
		deep(MaxDepth + 1), deepObj(MaxDepth + 1),
	}
	for _, in := range bad {
		if d, err := ArgumentsDigest([]byte(in)); !errors.Is(err, ErrArguments) {
			t.Errorf("ArgumentsDigest(%.40q) = %q, %v; want ErrArguments", in, d, err)
		}
	}
	// Negative controls: the same shapes, one step inside the limits.
	for _, in := range []string{deep(MaxDepth), deepObj(MaxDepth), `{"a":1,"b":1}`, `{"\ud800":1,"\udc00":2}`} {
		if _, err := ArgumentsDigest([]byte(in)); err != nil {
			t.Errorf("control %.40q: %v", in, err)
		}
	}
}

func TestCanonicalArguments(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{`null`, `{}`},
		{` { "b" : [ 1 , 2.50 , -0 , 1E+2 ] , "a" : { } } `, `{"a":{},"b":[1,2.50,-0,1E+2]}`},
		{`{"s":"\u0041\/\"\\\b\f\n\r\t\u0001\u001F\u007f"}`, "{\"s\":\"A/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\"}"},
		{`"\uD800x\uDBFF\uDFFF\uDC00"`, "\"\\ud800x\U0010FFFF\\udc00\""},
		{"\"\xff\xed\xa0\x80\u2028\"", "\"\xff\xed\xa0\x80\u2028\""},
		{`{"b":1,"a":2,"aa":3,"A":4}`, `{"A":4,"a":2,"aa":3,"b":1}`},
	}
	for _, tt := range tests {
		got, err := CanonicalArguments([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalArguments(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		again, err := CanonicalArguments(got)
		if err != nil || string(again) != string(got) {
			t.Errorf("canonical form of %q is not a fixpoint: %q, %v", got, again, err)
		}
	}
}
