package prompt_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"pgregory.net/rapid"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

// bare shows a rendering with its isolates named.
var bare = strings.NewReplacer("\u2066", "<LRI>", "\u2068", "<FSI>", "\u2069", "<PDI>")

func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string // isolates shown as <LRI>, <FSI>, <PDI>
	}{
		{`false`, 0, `<LRI>false<PDI>`},
		{`"false"`, 0, `«<FSI>false<PDI>»`},
		{`5`, 0, `<LRI>5<PDI>`},
		{`"5"`, 0, `«<FSI>5<PDI>»`},
		{`null`, 0, `<LRI>null<PDI>`},
		{`"null"`, 0, `«<FSI>null<PDI>»`},
		{`["a"]`, 0, `<LRI>[«<FSI>a<PDI>»]<PDI>`},
		{`"[\"a\"]"`, 0, `«<FSI>["a"]<PDI>»`},
		{` { "b" : [ 1 , -2.5e3 , true , null , { } , [ ] ] , "a" : "x" } `, 0,
			`<LRI>{«<FSI>b<PDI>»: [1, -2.5e3, true, null, {}, []], «<FSI>a<PDI>»: «<FSI>x<PDI>»}<PDI>`},
		// Escapes decoded, then escaped as Quote does: one line, no raw
		// guillemet, isolate or override from inside a string.
		{`{"k\n»":"v\u202e«\u2069"}`, 0, `<LRI>{«<FSI>k\n\u{BB}<PDI>»: «<FSI>v\u{202E}\u{AB}\u{2069}<PDI>»}<PDI>`},
		{`"\ud83d\ude00 \u00e9"`, 0, "«<FSI>😀 é<PDI>»"},
		// Cut in the middle: the … between whole atoms, a string's isolate
		// kept around what remains of it.
		{`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]`, 20, `<LRI>[1, 2,…, 18, 19, 20]<PDI>`},
		{`["abcdefghijklmnopqrstuvwxyz"]`, 12, `<LRI>[«<FSI>a…uvwxyz<PDI>»]<PDI>`},
		{`["abcdefghij",0,"klmnopqrstuvwxyz"]`, 16, `<LRI>[«<FSI>abc<PDI>…<FSI>stuvwxyz<PDI>»]<PDI>`},
		{`"abcdefghijklmnopqrstuvwxyz"`, 12, `«<FSI>abc…stuvwxyz<PDI>»`},
		{`1.0000000000000000000000`, 10, `<LRI>1.0…000000<PDI>`},
	} {
		got, err := prompt.JSON([]byte(tc.in), prompt.Options{MaxWidth: tc.width})
		if err != nil || bare.Replace(got) != tc.want {
			t.Errorf("JSON(%s, %d) = %s, %v; want %s", tc.in, tc.width, bare.Replace(got), err, tc.want)
		}
	}
	// A string is shown exactly as Value shows it.
	for _, s := range []string{"", "a b", "/home/x/y.txt", strings.Repeat("long ", 40), "a\u202eb"} {
		q := strconv.Quote(s)
		if got, err := prompt.JSON([]byte(q), prompt.Options{}); err != nil || got != prompt.Value(s, prompt.Options{}) {
			t.Errorf("JSON(%s) = %q, %v; want Value's %q", q, got, err, prompt.Value(s, prompt.Options{}))
		}
	}
}

// TestJSONRefuses: what readers would not all read as written, and what is
// not one JSON value, is refused with ErrJSON, saying where; keys escaped.
func TestJSONRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"a":2}`, "the key «\u2068a\u2069» is given twice"},
		{`{"a":1,"\u0061":2}`, "the key «\u2068a\u2069» is given twice"},
		{`{"x":[{"k\n":1,"k\n":2}]}`, "at «\u2068x\u2069»[0]: the key «\u2068k\\n\u2069» is given twice"},
		{`{"a":"\ud800"}`, "at «\u2068a\u2069»: a string holds a lone UTF-16 surrogate escape (\\uD800)"},
		{`["\udc00\ud800"]`, "at [0]: a string holds a lone UTF-16 surrogate escape (\\uDC00)"},
		{"{\"a\":[\"\xff\"]}", "at «\u2068a\u2069»[0]: a string holds bytes that are not UTF-8"},
		{"{\"\xff\":1}", "a string holds bytes that are not UTF-8"},
		{strings.Repeat("[", 129) + strings.Repeat("]", 129), "nested deeper than 128"},
		{``, "not a JSON value"},
		{`[1,]`, "not a JSON value"},
		{`{"a" 1}`, "not a JSON value"},
		{`01`, "data after the value"},
		{`1.`, "not a JSON value"},
		{`"a` + "\n" + `"`, "not a JSON value"},
		{`"\x"`, "not a JSON value"},
		{`tru`, "not a JSON value"},
		{`[1] [2]`, "data after the value"},
		{`nan`, "not a JSON value"},
		// Numbers a reader that uses doubles reads as another.
		{`9007199254740993`, "the number 9007199254740993 is read as 9007199254740992 by readers that use IEEE-754 doubles"},
		{`{"n":[-9007199254740993]}`, "at «\u2068n\u2069»[0]: the number -9007199254740993 is read as -9007199254740992"},
		{`123456789012345678`, "is read as 123456789012345680"},
		{`0.1000000000000000055511151231257827`, "is read as 0.1 by"},
		{`4.9e-324`, "is read as 5e-324 by"},
		{`1e400`, "the number 1e400 is beyond the largest IEEE-754 double"},
		{`-1.7976931348623159e308`, "is beyond the largest IEEE-754 double"},
		{`1e99999999999999999999999`, "is beyond the largest IEEE-754 double"},
		{`1e-400`, "the number 1e-400 is read as 0 by"},
		{`1` + strings.Repeat("0", 400), "the number 10000000000000000000…0000000000000000000 is beyond"},
	} {
		_, err := prompt.JSON([]byte(tc.in), prompt.Options{})
		if !errors.Is(err, prompt.ErrJSON) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("JSON(%q) = %v; want ErrJSON saying %q", tc.in, err, tc.want)
		}
		if cerr := prompt.CheckJSON([]byte(tc.in)); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("CheckJSON(%q) = %v; want JSON's %v", tc.in, cerr, err)
		}
	}
	// Controls: the deepest nesting accepted, an escaped backslash before
	// "ud800", the same key in two objects.
	// and numbers every reader reads alike: the shortest decimal of their
	// double (0.1, 1e23, 0.30000000000000004), the same value written
	// otherwise (1.0, 1.50, 1E+2, 100000000000000000000000), integers a
	// double holds (2^53, 2^53+2), the extremes, and zeros of any spelling.
	for _, in := range []string{strings.Repeat("[", 128) + strings.Repeat("]", 128), `"\\ud800"`, `[{"a":1},{"a":1}]`,
		`0.1`, `1e23`, `0.30000000000000004`, `1.0`, `1.50`, `1E+2`, `100000000000000000000000`, `9007199254740992`, `9007199254740994`,
		`-9007199254740992`, `1.7976931348623157e308`, `5e-324`, `-0`, `0.0e-99999999999999999999`} {
		if _, err := prompt.JSON([]byte(in), prompt.Options{}); err != nil || prompt.CheckJSON([]byte(in)) != nil {
			t.Errorf("JSON(%.40s…) = %v", in, err)
		}
	}
}

func TestJSONWarnings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []prompt.Warning
	}{
		{`{"a":[1,"b"]}`, nil},
		{`{"a":["b\u200b"]}`, []prompt.Warning{prompt.Hidden}},
		{`{"p\u0430ypal":1}`, []prompt.Warning{prompt.MixedScripts}},
		{`["p\u0430ypal","x\u200b","y\u200b"]`, []prompt.Warning{prompt.Hidden, prompt.MixedScripts}},
		{`{"a":1,"a":2}`, nil},
	} {
		if got := prompt.JSONWarnings([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("JSONWarnings(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// jsonValue draws a JSON value and writes it in one of its many spellings
// (whitespace, escapes of any code point, surrogate pairs). Strings are
// made of the pieces a rendering could be confused by: its own guillemets,
// isolates, brackets, commas, colons, literal words and digits, quotes,
// backslashes and the ellipsis.
func jsonValue(depth int) *rapid.Generator[string] {
	pieces := []string{"a", "b", " ", "«", "»", "\u2066", "\u2068", "\u2069", "\u202e", "[", "]", "{", "}",
		",", ", ", ":", ": ", "\"", "\\", "…", "true", "null", "5", "-", "\n", "é", "e\u0301", "中", "😀", "\u0301", "\u300b", "x\u200b"}
	spaces := rapid.SampledFrom([]string{"", "", "", " ", "\n\t "})
	str := rapid.Custom(func(t *rapid.T) string {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 6).Draw(t, "pieces"), "")
		if rapid.Bool().Draw(t, "any") {
			s += rapid.StringN(0, 4, -1).Draw(t, "text")
		}
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				b.WriteString(`\` + string(r))
			case r < 0x20 || rapid.IntRange(0, 4).Draw(t, "escape") == 0:
				if r > 0xFFFF {
					hi, lo := utf16.EncodeRune(r)
					fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
				} else {
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
		return b.String()
	})
	number := rapid.OneOf(
		rapid.SampledFrom([]string{"0", "-0", "5", "-5", "1.5", "1e2", "1E+2", "0.1", "-0.0", "123456789"}),
		rapid.Custom(func(t *rapid.T) string { return strconv.FormatInt(rapid.Int64().Draw(t, "int")>>11, 10) }),
		rapid.Custom(func(t *rapid.T) string {
			return strconv.FormatFloat(rapid.Float64().Draw(t, "float"), 'g', -1, 64)
		}).Filter(func(s string) bool { return !strings.ContainsAny(s, "NI") }),
	)
	scalar := rapid.OneOf(str, number, rapid.SampledFrom([]string{"true", "false", "null"}))
	if depth == 0 {
		return scalar
	}
	inner := jsonValue(depth - 1)
	array := rapid.Custom(func(t *rapid.T) string {
		items := rapid.SliceOfN(inner, 0, 4).Draw(t, "items")
		sep := spaces.Draw(t, "sp") + "," + spaces.Draw(t, "sp")
		return "[" + spaces.Draw(t, "sp") + strings.Join(items, sep) + spaces.Draw(t, "sp") + "]"
	})
	object := rapid.Custom(func(t *rapid.T) string {
		keys := rapid.SliceOfNDistinct(str, 0, 4, func(k string) string { return mustCanon(k) }).Draw(t, "keys")
		var members []string
		for _, k := range keys {
			members = append(members, k+spaces.Draw(t, "sp")+":"+spaces.Draw(t, "sp")+inner.Draw(t, "value"))
		}
		return "{" + strings.Join(members, ","+spaces.Draw(t, "sp")) + "}"
	})
	return rapid.OneOf(scalar, scalar, array, object)
}

// mustCanon is the canonical form of a JSON value (requeststate's: strings
// by what they decode to, numbers by their literal text, object members
// sorted), inside an array so that null stays null.
func mustCanon(v string) string {
	c, err := requeststate.CanonicalArguments([]byte("[" + v + "]"))
	if err != nil {
		panic(fmt.Sprintf("canon(%q): %v", v, err))
	}
	return string(c)
}

// TestJSONDistinctValuesShownApart: two JSON values render alike only if
// they are the same value, or a rendering was cut (and marked so with its
// one …). Untruncated, the rendering is read back by readJSON, a parser of
// the rendering written from the package doc alone, to the very value
// given. Every rendering is one line of valid UTF-8 with balanced
// isolates, within its width. The negative control: the same property
// fails the question's old rendering (a string's text, or any other
// value's JSON, between « and »), under which false and "false" read alike.
func TestJSONDistinctValuesShownApart(t *testing.T) {
	rapidtest.OutOfTree(t)
	rapid.Check(t, func(rt *rapid.T) { shownApart(rt, prompt.JSON) })

	old := func(raw []byte, opts prompt.Options) (string, error) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		if s, ok := v.(string); ok {
			return prompt.Value(s, opts), nil
		}
		return prompt.Value(mustCanon(string(raw)), opts), nil
	}
	r := &recorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(r, func(rt *rapid.T) { shownApart(rt, old) })
	}()
	<-done
	if !r.Failed() {
		t.Fatal("control: the property passes the old rendering")
	}
}

// shownApart is the property of TestJSONDistinctValuesShownApart, for
// render.
func shownApart(t *rapid.T, render func([]byte, prompt.Options) (string, error)) {
	gen := jsonValue(3)
	a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
	width := rapid.IntRange(1, 120).Draw(t, "width")
	whole := map[string]string{}
	for _, v := range []string{a, b} {
		r, err := render([]byte(v), prompt.Options{MaxWidth: 1 << 20})
		if err != nil {
			t.Fatalf("JSON(%q): %v", v, err)
		}
		back, err := readJSON(r)
		if err != nil || mustCanon(back) != mustCanon(v) {
			t.Fatalf("JSON(%q) = %q reads back as %q (%v)", v, bare.Replace(r), back, err)
		}
		whole[v] = r
	}
	if same := mustCanon(a) == mustCanon(b); whole[a] == whole[b] && !same {
		t.Fatalf("%q and %q both render as %q", a, b, bare.Replace(whole[a]))
	}
	ra, _ := render([]byte(a), prompt.Options{MaxWidth: width})
	rb, _ := render([]byte(b), prompt.Options{MaxWidth: width})
	for _, r := range []string{ra, rb} {
		if err := wellFormed(r, width); err != nil {
			t.Fatalf("JSON at width %d = %q: %v", width, bare.Replace(r), err)
		}
	}
	if ra == rb && mustCanon(a) != mustCanon(b) && !strings.Contains(ra, "…") {
		t.Fatalf("%q and %q both render as %q at width %d, unmarked", a, b, bare.Replace(ra), width)
	}
	if strings.Contains(ra, "…") != (ra != whole[a]) {
		t.Fatalf("JSON(%q) at width %d = %q: a … exactly when cut", a, width, bare.Replace(ra))
	}
}

// recorder is a rapid.TB that records a failure instead of failing the
// test, for negative controls.
type recorder struct {
	*testing.T
	mu     sync.Mutex
	failed bool
}

func (r *recorder) Name() string                      { return r.T.Name() + "_control" }
func (r *recorder) Errorf(format string, args ...any) { r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.FailNow() }
func (r *recorder) Fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) Log(args ...any)                   {}
func (r *recorder) Logf(format string, args ...any)   {}

// wellFormed returns what is wrong with r as a rendering at width.
func wellFormed(r string, width int) error {
	if !utf8.ValidString(r) || strings.ContainsAny(r, "\n\r\u2028\u2029") {
		return errors.New("not one line of valid UTF-8")
	}
	open := 0
	for _, c := range r {
		switch c {
		case '\u2066', '\u2067', '\u2068':
			open++
		case '\u2069':
			if open--; open < 0 {
				return errors.New("a PDI without its isolate")
			}
		case '\u202a', '\u202b', '\u202c', '\u202d', '\u202e':
			return errors.New("a raw embedding or override")
		}
	}
	if open != 0 {
		return errors.New("an isolate left open")
	}
	if w := uniseg.StringWidth(r); w > width+2 {
		return fmt.Errorf("%d columns wide", w)
	}
	if strings.Count(r, "…") > 1 {
		return errors.New("more than one …")
	}
	return nil
}

// readJSON reads an untruncated rendering back into JSON text, by the
// package doc's grammar: a string is « FSI Quote(s) PDI »; anything else
// is in one LRI … PDI, with [ ], { }, ", " and ": " and literals raw.
func readJSON(r string) (string, error) {
	if strings.HasPrefix(r, "«\u2068") {
		v, rest, err := readString(r)
		if err != nil || rest != "" {
			return "", fmt.Errorf("a string with %q after it (%v)", rest, err)
		}
		return v, nil
	}
	inner, okOpen := strings.CutPrefix(r, "\u2066")
	inner, okClose := strings.CutSuffix(inner, "\u2069")
	if !okOpen || !okClose {
		return "", errors.New("not in an LRI … PDI")
	}
	v, rest, err := readValue(inner)
	if err != nil || rest != "" {
		return "", fmt.Errorf("%q after the value (%v)", rest, err)
	}
	return v, nil
}

func readString(r string) (v, rest string, err error) {
	body, ok := strings.CutPrefix(r, "«\u2068")
	end := strings.Index(body, "\u2069»")
	if !ok || end < 0 {
		return "", "", fmt.Errorf("no string at %q", r)
	}
	s, err := prompt.Unquote(body[:end])
	if err != nil {
		return "", "", err
	}
	q, err := json.Marshal(s)
	return string(q), body[end+len("\u2069»"):], err
}

func readValue(r string) (v, rest string, err error) {
	switch {
	case strings.HasPrefix(r, "«"):
		return readString(r)
	case strings.HasPrefix(r, "["), strings.HasPrefix(r, "{"):
		obj := r[0] == '{'
		closing := map[bool]string{false: "]", true: "}"}[obj]
		out, rest := r[:1], r[1:]
		for first := true; ; first = false {
			if after, ok := strings.CutPrefix(rest, closing); ok {
				return out + closing, after, nil
			}
			if !first {
				var ok bool
				if rest, ok = strings.CutPrefix(rest, ", "); !ok {
					return "", "", fmt.Errorf("no separator at %q", rest)
				}
				out += ","
			}
			if obj {
				var k string
				if k, rest, err = readString(rest); err != nil {
					return "", "", err
				}
				var ok bool
				if rest, ok = strings.CutPrefix(rest, ": "); !ok {
					return "", "", fmt.Errorf("no colon at %q", rest)
				}
				out += k + ":"
			}
			var item string
			if item, rest, err = readValue(rest); err != nil {
				return "", "", err
			}
			out += item
		}
	}
	end := strings.IndexAny(r, ",]}")
	if end < 0 {
		end = len(r)
	}
	lit := r[:end]
	if lit != "true" && lit != "false" && lit != "null" {
		if _, err := strconv.ParseFloat(lit, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return "", "", fmt.Errorf("not a literal: %q", lit)
		}
	}
	return lit, r[end:], nil
}

func ExampleJSON() {
	show := strings.NewReplacer("\u2066", "", "\u2068", "", "\u2069", "") // the isolates, hidden
	for _, v := range []string{`false`, `"false"`, `["a", 5, null]`, `"[\"a\", 5, null]"`, `{"path": "/tmp/x\n"}`} {
		s, _ := prompt.JSON([]byte(v), prompt.Options{})
		fmt.Println(show.Replace(s))
	}
	_, err := prompt.JSON([]byte(`{"a": 1, "a": 2}`), prompt.Options{})
	fmt.Println(show.Replace(err.Error()))
	// Output:
	// false
	// «false»
	// [«a», 5, null]
	// «["a", 5, null]»
	// {«path»: «/tmp/x\n»}
	// prompt: JSON value cannot be shown exactly: the key «a» is given twice
}
