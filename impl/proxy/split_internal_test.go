package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// splitByDecoder is splitArguments as encoding/json's decoder splits, the
// reference for the scan that replaced it.
func splitByDecoder(t *testing.T, canon []byte) []argument {
	dec := json.NewDecoder(bytes.NewReader(canon))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not an object", canon)
	}
	var args []argument
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		args = append(args, argument{key: tok.(string), raw: raw})
	}
	return args
}

// randomJSON returns a random JSON value: strings with quotes, backslashes,
// controls, slashes and non-ASCII text, numbers, literals, and nested
// arrays and objects.
func randomJSON(rnd *rand.Rand, depth int) any {
	pieces := []string{"a", `"`, `\`, "\\u", "\n", "\t", "\x01", "\x1f", "/", "é", "中", "👍", "}", "]", ",", ":", " ", `\"`, "\u2028"}
	str := func() string {
		var b strings.Builder
		for range rnd.IntN(8) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		return b.String()
	}
	switch k := rnd.IntN(7); {
	case k == 0 && depth > 0:
		var a []any
		for range rnd.IntN(4) {
			a = append(a, randomJSON(rnd, depth-1))
		}
		return a
	case k == 1 && depth > 0:
		m := map[string]any{}
		for range rnd.IntN(4) {
			m[str()] = randomJSON(rnd, depth-1)
		}
		return m
	case k == 2:
		return json.Number([]string{"0", "-1.5e10", "123456789", "0.25"}[rnd.IntN(4)])
	case k == 3:
		return []any{true, false, nil}[rnd.IntN(3)]
	}
	return str()
}

// TestSplitArgumentsMatchesDecoder checks the scan of splitArguments and
// decodeString against encoding/json on random canonical arguments.
func TestSplitArgumentsMatchesDecoder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		m := map[string]any{}
		for range rnd.IntN(5) {
			m[fmt.Sprint(randomJSON(rnd, 0))] = randomJSON(rnd, 3)
		}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := requeststate.CanonicalArguments(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := splitArguments(canon)
		if err != nil {
			t.Fatalf("splitArguments(%s): %v", canon, err)
		}
		want := splitByDecoder(t, canon)
		if !slices.EqualFunc(got, want, func(a, b argument) bool { return a.key == b.key && bytes.Equal(a.raw, b.raw) }) {
			t.Fatalf("splitArguments(%s) = %q, encoding/json %q", canon, got, want)
		}
		for _, a := range got {
			if a.raw[0] != '"' {
				continue
			}
			var s string
			if err := json.Unmarshal(a.raw, &s); err != nil {
				t.Fatal(err)
			}
			if d, err := decodeString(a.raw); err != nil || d != s {
				t.Fatalf("decodeString(%s) = %q, %v; encoding/json %q", a.raw, d, err, s)
			}
		}
	}
	// Negative control: the reference notices a member split wrongly.
	if args := splitByDecoder(t, []byte(`{"a":"x\",\"b\":1"}`)); len(args) != 1 {
		t.Fatalf("reference split %q", args)
	}
}
