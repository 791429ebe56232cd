package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func mustSplit(t *testing.T, raw string) []argument {
	t.Helper()
	canon, err := requeststate.CanonicalArguments([]byte(raw))
	if err != nil {
		t.Fatalf("CanonicalArguments(%s): %v", raw, err)
	}
	args, err := splitArguments(canon)
	if err != nil {
		t.Fatalf("splitArguments(%s): %v", canon, err)
	}
	return args
}

func TestQuestion(t *testing.T) {
	long := strings.Repeat("0123456789", 30)
	for _, tc := range []struct {
		name, args, template string
		want                 []string // lines
	}{
		{"no arguments", `{}`, "", []string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with no arguments?"}},
		{"one", `{"a":1}`, "", []string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly this argument?", "- «\u2068a\u2069»: number \u20661\u2069"}},
		{"sorted, numbers as written, nested JSON", `{"z":10000000000000000000000,"b":{"y":[true,null]},"a":"x"}`, "",
			[]string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly these 3 arguments?",
				"- «\u2068a\u2069»: string «\u2068x\u2069»",
				"- «\u2068b\u2069»: object \u2066{«\u2068y\u2069»: [true, null]}\u2069",
				"- «\u2068z\u2069»: number \u206610000000000000000000000\u2069"}},
		{"every JSON type told apart", `{"a":false,"b":"false","c":5,"d":"5","e":null,"f":"null","g":["a"],"h":"[\"a\"]","i":{},"j":"{}"}`, "",
			[]string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly these 10 arguments?",
				"- «\u2068a\u2069»: boolean \u2066false\u2069",
				"- «\u2068b\u2069»: string «\u2068false\u2069»",
				"- «\u2068c\u2069»: number \u20665\u2069",
				"- «\u2068d\u2069»: string «\u20685\u2069»",
				"- «\u2068e\u2069»: null",
				"- «\u2068f\u2069»: string «\u2068null\u2069»",
				"- «\u2068g\u2069»: array \u2066[«\u2068a\u2069»]\u2069",
				"- «\u2068h\u2069»: string «\u2068[\"a\"]\u2069»",
				"- «\u2068i\u2069»: object \u2066{}\u2069",
				"- «\u2068j\u2069»: string «\u2068{}\u2069»"}},
		{"a nested key escaped and noted, a nested value cut inside its isolate, with size and digest", `{"n":{"k\u202e":"` + long + `"}}`, "",
			[]string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly this argument?",
				"- «\u2068n\u2069»: object \u2066{«\u2068k\\u{202E}\u2069»: «\u2068" + long[:24] + "…" + long[300-78:] + "\u2069»}\u2069 (shortened: 311 bytes, sha256 " + shortSum("{\"k\u202e\":\""+long+"\"}") + ") (note: " + string(prompt.Hidden) + ")"}},
		{"a key that forges a line", "{\"x\\n- «y»\":\"z\"}", "",
			[]string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly this argument?", "- «\u2068x\\n- \\u{AB}y\\u{BB}\u2069» (note: " + string(prompt.Hidden) + "): string «\u2068z\u2069»"}},
		{"template", `{"path":"/a","content":"hi"}`, "Write {content} to {path}? {{not {{an}} arg}}",
			[]string{"Write «\u2068hi\u2069» to «\u2066/\u2068a\u2069\u2069»? {not {an} arg}",
				"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly these 2 arguments?",
				"- «\u2068content\u2069»: string «\u2068hi\u2069»",
				"- «\u2068path\u2069»: string «\u2066/\u2068a\u2069\u2069»"}},
		{"template naming an absent argument", `{}`, "Delete {path}?",
			[]string{"Delete (no path)?", "Run the tool «\u2068t\u2069» of «\u2068up\u2069» with no arguments?"}},
		{"shortened value shows size and digest", `{"c":"` + long + `"}`, "",
			[]string{"Run the tool «\u2068t\u2069» of «\u2068up\u2069» with exactly this argument?",
				"- «\u2068c\u2069»: string «\u2068" + long[:39] + "…" + long[300-80:] + "\u2069» (shortened: 300 bytes, sha256 " + shortSum(long) + ")"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tmpl template
			if tc.template != "" {
				var err error
				if tmpl, err = parseTemplate(tc.template); err != nil {
					t.Fatal(err)
				}
			}
			got := strings.Split(question("up", "t", mustSplit(t, tc.args), tmpl), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("question:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Arguments a question could not show as the upstream reads them are
// refused before asking.
func TestSplitArgumentsRefuses(t *testing.T) {
	for _, raw := range []string{`[1]`, `"s"`, `1`, `true`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"\udfff":1}`} {
		canon, err := requeststate.CanonicalArguments([]byte(raw))
		if err != nil {
			t.Fatalf("CanonicalArguments(%q): %v", raw, err)
		}
		if _, err := splitArguments(canon); err == nil {
			t.Errorf("splitArguments(%q) accepted", raw)
		}
	}
	// Negative control: an escaped backslash followed by "ud" is text.
	if _, err := splitArguments([]byte(`{"a":"\\ud800"}`)); err != nil {
		t.Errorf(`a literal backslash-u-d was taken for a surrogate: %v`, err)
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range maxArguments + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":0`)
	}
	many.WriteString("}")
	if _, err := splitArguments([]byte(many.String())); err == nil {
		t.Errorf("%d arguments accepted", maxArguments+1)
	}
}

func shortSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

func TestShowValue(t *testing.T) {
	long := "/" + strings.Repeat("dir/", 40) + "file.txt"
	v := showValue(long, 60)
	if !strings.Contains(v, "…") || !strings.Contains(v, "file.txt") || !strings.Contains(v, "(shortened: 169 bytes, sha256 "+shortSum(long)+")") {
		t.Errorf("a long path shows as %q, want its file name, a cut, its size and digest", v)
	}
	if v := showValue("/short/path.txt", 60); strings.Contains(v, "shortened") {
		t.Errorf("a short path is said to be shortened: %q", v)
	}
	if v := showValue("p\u0430ypal", 60); !strings.Contains(v, "(note: "+string(prompt.MixedScripts)+")") {
		t.Errorf("a mixed-script value has no note: %q", v)
	}
	if v := showValue("/home/p\u0430ypal/report", 60); !strings.Contains(v, "(note: "+string(prompt.MixedScripts)+")") {
		t.Errorf("a mixed-script path has no note: %q", v)
	}
	// Negative control: an ellipsis in the value itself is escaped, so it is
	// not taken for a cut.
	if v := showValue("wait…", 60); strings.Contains(v, "shortened") {
		t.Errorf("a value holding … is said to be shortened: %q", v)
	}
}

// TestQuestionCutsLongNames: a tool name, an upstream name and an
// argument name past their widths are cut, with their size and digest;
// ones within them are shown whole (the control).
func TestQuestionCutsLongNames(t *testing.T) {
	for _, n := range []int{30, 100} {
		name := strings.Repeat("x", n)
		args := mustSplit(t, `{"`+name+`":1}`)
		q := question(name, name, args, nil)
		cut := fmt.Sprintf("(shortened: %d bytes, sha256 %s)", n, shortSum(name))
		if got, want := strings.Count(q, cut), map[bool]int{true: 3, false: 0}[n > 40]; got != want {
			t.Errorf("names of %d bytes: %d of the three cut, want %d:\n%s", n, got, want, q)
		}
	}
}

// TestWantedEscapesTypes: the type names an upstream's schema gives are
// escaped in a refusal, as every other text of the upstream's.
func TestWantedEscapesTypes(t *testing.T) {
	if w := wanted([]string{"str\u202eing", "null"}); strings.ContainsRune(w, '\u202e') || !strings.Contains(w, "null") {
		t.Errorf("wanted = %q", w)
	}
}

// TestSchemaCacheBounded: an upstream that changes its tools all the
// time does not grow the compiled schemas past maxSchemas, and each is
// still compiled (the control).
func TestSchemaCacheBounded(t *testing.T) {
	var sc schemaCache
	for i := range 3 * maxSchemas {
		def := &mcp.Tool{Name: fmt.Sprint("t", i), InputSchema: map[string]any{"type": "object"}}
		if c := sc.compile(Fingerprint(def), def); c.refusal != nil || c.resolved == nil {
			t.Fatalf("tool %d: %v", i, c.refusal)
		}
		if len(sc.m) > maxSchemas {
			t.Fatalf("%d schemas kept after %d tools, want at most %d", len(sc.m), i+1, maxSchemas)
		}
	}
}

// TestTypeMismatchFollowsTheSchema: the explanation of a refusal finds
// the mistyped value through every keyword it follows; a value of the
// right type finds none (the control).
func TestTypeMismatchFollowsTheSchema(t *testing.T) {
	for _, c := range []struct {
		name, schema, value string
		where               string // "" finds none
	}{
		{"properties", `{"type":"object","properties":{"x":{"type":"string"}}}`, `{"x":1}`, "the argument «\u2068x\u2069»"},
		{"additionalProperties", `{"type":"object","additionalProperties":{"type":"string"}}`, `{"x":1}`, "the argument «\u2068x\u2069»"},
		{"prefixItems", `{"type":"object","properties":{"l":{"type":"array","prefixItems":[{"type":"string"}]}}}`, `{"l":[1]}`, "the value at «\u2068l\u2069»[0]"},
		{"items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`, `{"l":["a",1]}`, "the value at «\u2068l\u2069»[1]"},
		{"$defs, escaped", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a~1b"}},"$defs":{"a/b":{"type":"string"}}}`, `{"x":1}`, "the argument «\u2068x\u2069»"},
		{"definitions", `{"type":"object","properties":{"x":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"string"}}}`, `{"x":1}`, "the argument «\u2068x\u2069»"},
		{"a pointer into properties", `{"type":"object","properties":{"a":{"type":"string"},"x":{"$ref":"#/properties/a"}}}`, `{"a":"s","x":1}`, "the argument «\u2068x\u2069»"},
		{"control", `{"type":"object","properties":{"x":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"string"}}}`, `{"x":"s"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s jsonschema.Schema
			var v any
			if err := errors.Join(json.Unmarshal([]byte(c.schema), &s), json.Unmarshal([]byte(c.value), &v)); err != nil {
				t.Fatal(err)
			}
			m, ok := typeMismatch(&s, &s, v, nil, 0)
			switch {
			case c.where == "" && ok:
				t.Fatalf("found %v", m)
			case c.where != "" && (!ok || m.where() != c.where):
				t.Fatalf("found %v at %q, want one at %q", ok, m.where(), c.where)
			}
		})
	}
}
