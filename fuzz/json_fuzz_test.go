package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// jsonSeeds are JSON texts a question could be confused by.
func jsonSeeds() [][]byte {
	seeds := [][]byte{
		[]byte(`false`), []byte(`"false"`), []byte(`5`), []byte(`"5"`), []byte(`null`), []byte(`"null"`),
		[]byte(`["a"]`), []byte(`"[\"a\"]"`), []byte(`{"a":[1,true,null,{"b":"c"}],"d":{}}`),
		[]byte(`{"a":1,"a":2}`), []byte(`{"a":1,"\u0061":2}`), []byte(`["\ud800"]`), []byte(`"\ud83d\ude00"`),
		[]byte("[\"\xff\"]"), []byte(`{"k\n»":"v\u202e«\u2069"}`), []byte(`[1,2`), []byte(`01`), []byte(` [ ] `),
		[]byte(`9007199254740993`), []byte(`1e400`), []byte(`-0.0`), []byte(`"\\ud800"`),
		[]byte(`[0.1,1e23,5e-324,4.9e-324,1.50,-0,0e999999999999999999999,9007199254740994]`),
		[]byte(`0.1000000000000000055511151231257827`), []byte(`1e-400`), []byte(`123456789012345678`),
		[]byte(strings.Repeat("[", 128) + strings.Repeat("]", 128)), []byte(strings.Repeat("[", 129) + strings.Repeat("]", 129)),
	}
	for _, s := range sanitizeSeeds() {
		if b, err := json.Marshal(s); err == nil {
			seeds = append(seeds, b, []byte(`{`+string(b)+`:[`+string(b)+`,0]}`))
		}
	}
	return seeds
}

// FuzzSanitizeJSON asserts that prompt.JSON (and CheckJSON, with the same
// error) accepts exactly the JSON values
// that requeststate's canonical parser (an independent one) accepts and
// that hold no bytes that are not UTF-8 and no lone surrogate; that it
// refuses the rest with ErrJSON; and that each rendering is one line of
// valid UTF-8 with balanced isolates, at most one …, within its width,
// and, uncut, shows every string of the value quoted as Value quotes it.
func FuzzSanitizeJSON(f *testing.F) {
	for i, s := range jsonSeeds() {
		f.Add(s, []int{0, 1, 2, 5, 8, 13, 20, 80}[i%8])
	}
	f.Fuzz(func(t *testing.T, data []byte, maxWidth int) {
		maxWidth %= 200
		v, err := prompt.JSON(data, prompt.Options{MaxWidth: maxWidth})
		if maxWidth <= 0 {
			maxWidth = prompt.DefaultMaxWidth
		}
		if err := sanitizeCheckJSON(data, v, err, maxWidth); err != nil {
			t.Fatalf("JSON(%q, %d) = %+q: %v", data, maxWidth, v, err)
		}
		if cerr := prompt.CheckJSON(data); (cerr == nil) != (err == nil) || cerr != nil && cerr.Error() != err.Error() {
			t.Fatalf("CheckJSON(%q) = %v, JSON's error %v", data, cerr, err)
		}
	})
}

// sanitizeCheckJSON returns what is wrong with v, err as JSON's answer for
// data at maxWidth.
func sanitizeCheckJSON(data []byte, v string, err error, maxWidth int) error {
	canon, cerr := requeststate.CanonicalArguments(data)
	want := len(data) > 0 && cerr == nil && utf8.Valid(data) && !canonSurrogate(canon) && exactNumbers(data)
	switch {
	case err != nil && !errors.Is(err, prompt.ErrJSON):
		return fmt.Errorf("the error %v does not wrap ErrJSON", err)
	case err != nil && want:
		return fmt.Errorf("refused a value the oracle accepts: %v", err)
	case err != nil:
		return nil
	case !want:
		return fmt.Errorf("accepted what the oracle refuses (%v)", cerr)
	case !json.Valid(data):
		return errors.New("accepted text encoding/json says is not JSON")
	}
	if !utf8.ValidString(v) || strings.ContainsAny(v, "\n\r\u2028\u2029\u202a\u202b\u202c\u202d\u202e") {
		return errors.New("not one line of valid UTF-8 without embeddings or overrides")
	}
	open := 0
	for _, r := range v {
		switch r {
		case '\u2066', '\u2067', '\u2068':
			open++
		case '\u2069':
			if open--; open < 0 {
				return errors.New("a PDI without its isolate")
			}
		}
	}
	if open != 0 {
		return errors.New("an isolate left open")
	}
	if n := strings.Count(v, "…"); n > 1 {
		return fmt.Errorf("%d …", n)
	}
	if w := uniseg.StringWidth(v); w > maxWidth+2 {
		return fmt.Errorf("%d columns wide, over %d", w, maxWidth)
	}
	var top any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return err
	}
	if _, isString := top.(string); isString != strings.HasPrefix(v, "«\u2068") || !isString && !strings.HasPrefix(v, "\u2066") {
		return errors.New("a string not between «FSI and PDI», or another value not in one LRI … PDI")
	}
	if strings.Contains(v, "…") {
		return nil
	}
	var missing error
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			if q := "«\u2068" + prompt.Quote(x) + "\u2069»"; !strings.Contains(v, q) && missing == nil {
				missing = fmt.Errorf("uncut, yet the string %+q is not shown as %+q", x, q)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			for k, y := range x {
				walk(k)
				walk(y)
			}
		}
	}
	walk(top)
	return missing
}

// canonSurrogate reports whether canonical JSON holds a \uDxxx escape:
// the canonical form writes \u only for control characters (\u00xx) and
// lone surrogates, and a literal backslash as \\.
func canonSurrogate(canon []byte) bool {
	for i := 0; i+2 < len(canon); i++ {
		if canon[i] == '\\' {
			if canon[i+1] == 'u' && (canon[i+2] == 'd' || canon[i+2] == 'D') {
				return true
			}
			i++
		}
	}
	return false
}

// exactNumbers reports whether every number in the valid JSON data is read
// alike by a reader that keeps its decimal and one that rounds it to the
// nearest IEEE-754 double and shows that as its shortest round-trip
// decimal: the two decimals compared as exact rationals (math/big), zeros
// and numbers past the double range decided without them.
func exactNumbers(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return false
		}
		zero := strings.Trim(strings.SplitN(strings.ToLower(string(n)), "e", 2)[0], "-0.") == ""
		if f == 0 || zero {
			if f != 0 || !zero {
				return false
			}
			continue
		}
		lit, ok1 := new(big.Rat).SetString(string(n))
		short, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if !ok1 || !ok2 || lit.Cmp(short) != 0 {
			return false
		}
	}
}

// TestSanitizeJSONFuzzOracle is the negative control for sanitizeCheckJSON:
// each known-broken answer must be caught, and JSON's own must not.
func TestSanitizeJSONFuzzOracle(t *testing.T) {
	lri, fsi, pdi := "\u2066", "\u2068", "\u2069"
	for _, bad := range []struct {
		data, v string
		err     error
	}{
		{`"false"`, lri + "false" + pdi, nil},                                                    // a string shown as a literal
		{`false`, "«" + fsi + "false" + pdi + "»", nil},                                          // a literal shown as a string
		{`["a\nb"]`, lri + "[«" + fsi + "a\nb" + pdi + "»]" + pdi, nil},                          // a raw line break
		{`["a"]`, lri + "[«" + fsi + "a" + "»]" + pdi, nil},                                      // an isolate left open
		{`["a","b"]`, lri + "[«" + fsi + "a" + pdi + "», «" + fsi + "c" + pdi + "»]" + pdi, nil}, // a string not shown
		{`[1,2,3]`, lri + "[1…2…3]" + pdi, nil},                                                  // two …
		{`{"a":1,"a":2}`, lri + "{«" + fsi + "a" + pdi + "»: 2}" + pdi, nil},                     // a duplicate accepted
		{`["\ud800"]`, lri + "[«" + fsi + "\uFFFD" + pdi + "»]" + pdi, nil},                      // a lone surrogate accepted
		{`[9007199254740993]`, lri + "[9007199254740993]" + pdi, nil},                            // a number no double holds accepted
		{`[1e-400]`, lri + "[1e-400]" + pdi, nil},                                                // a number read as 0 accepted
		{`[0.1]`, "", fmt.Errorf("%w", prompt.ErrJSON)},                                          // a number every reader reads alike refused
		{`[1]`, "", errors.New("refused")},                                                       // a good value refused
		{`[1]`, "", fmt.Errorf("%w", prompt.ErrJSON)},                                            // refused with ErrJSON, still wrong
	} {
		if sanitizeCheckJSON([]byte(bad.data), bad.v, bad.err, 80) == nil {
			t.Errorf("JSON checker accepted %+q, %v for %s", bad.v, bad.err, bad.data)
		}
	}
	if sanitizeCheckJSON([]byte(`[1,2,3,4,5]`), lri+"[1, 2, 3, 4, 5]"+pdi, nil, 5) == nil {
		t.Error("JSON checker accepted a rendering too wide")
	}
	for i, s := range jsonSeeds() {
		for _, w := range []int{1, 7, 20, 80} {
			v, err := prompt.JSON(s, prompt.Options{MaxWidth: w})
			if err := sanitizeCheckJSON(s, v, err, w); err != nil {
				t.Errorf("seed %d, JSON(%q, %d) = %+q: %v", i, s, w, v, err)
			}
		}
	}
}
