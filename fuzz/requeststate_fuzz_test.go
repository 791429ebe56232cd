package fuzz

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// Public test secrets: the first seals new tokens, both verify.
const (
	fuzzKeyOne = "fuzz-requeststate-key-one-0123456789abcdef"
	fuzzKeyTwo = "fuzz-requeststate-key-two-0123456789abcdef"
)

// committedTokens were sealed once with fuzzKeyOne (first three) and
// fuzzKeyTwo (last three); the seed corpora derive from them. They are the
// only tokens from outside this process that Open may accept.
func committedTokens() []string {
	return []string{
		"v1.GrhOSPqMpNE0xXlZckFlQ2gQWwxeiT9qRElSJeFra6KMjH82VEQAhrCD10ibPsDbIdTDTfp4E92gXKC8th7cxfmpyOHQW9EYBlUVd3Kh_IA_ur9XNN4PGZpxjGqVuoad5QAmaEZG1Rz6_tQ3GjDJlGJhtPjd32V_hQJCw46ZHaeJkHwWdr0GZX2JltIm4iYedP2E8DyFh5SUAd0hdqMf-AyzPtWQLMGAuiOonYUQ-k-1MOrITjyWGUdkS95ErQ-6dihxDrknsrSbiHcyicyzah3Avd2SArN3piuFvep-UITr1itDOuPQH0tAKdJKi7IZ5sIkWC79Gt5M6psnD9o4AwblQw7vWd-fnpvIdkN5EZZa0wntdbYXbZWEsdJKYxLJRFatATfW",
		"v1.GrhOSC9PniYCzJFqajfxOjGBevq5G9pEgg2WKZW9hzC_U3E_hKCXZ2Xfl03dUNxLWgU4tRi3_X735rgZIkXR52mHMvoth_PbzaEvxykII1JjNY1s7W06sFhHd5tF55nAcEOyDpssK3vHYpumvDhw--QovHrhg0LUV2I8RFoK4fEFQZ6qXNOBQNoilzFLv75vPqOGDhX_e2ga0LUNSmqzAM5s_B_IK8gALMrVcyIZ8OMILRpnf1JLp3ho9CHpz_NJAf2QbrLJHvbxHNWM2bBbBojL6MxmKpOPnLDQ95IlZNn4",
		"v1.GrhOSDRV51E0Yr1HzOMgxX6SbxFT7d2Zqp0M6KAXSTTKfXj2i81hPYQXbSZVZjyJT02ZNT8MfEL-tRGDixYsR-JUjhK5fUHZvrgAxzIDzXClUTcXUaUWl0q5q_EgDn_fZ0pAnkB68Zp9waCME_GFg5B058jpv-MJqycYQfZmuzwXMmb0-0jGD7moa5d_SB2CGFDHvS50OF9bJOfiow",
		"v1.hYkMvEurZDOIJhAFHO_5A03B2yPsgk0pw2aKbPLS69lubRytwbVbO6w4iPyNRI1VeMpma6BCwszkfQkdfB-KSEsPg4IYNGtoy8uVFCF-kjGpmobe_1aqoyHR3ugExmrWGJRLGnO3uptL9wMSvlUtal67kPhrOaWi41jjnDfpUuCQb7ucUmuzx3TcIMymMHwdd8YZoxcpQWOE7t8cBI4ImDRyZRc9Szf83ea9OHe4iIBuDfQ3TdMR6dvyvVtc0PqThpFsCLukNQrSMRnhlltw1X5jZLe6wqm7Dx0mAhfbH1r_5eHCYd_iJrIgeRJWiktxHI7rcrhJnK5VqB4YoRoZ_e03OfFSWI3uekQZ3cwoM77UmyOeO3rYR-KnUp7lZ2g6uSW5E2lz",
		"v1.hYkMvGhcnFf_Ux2GvhVaURUtXsSoix8xkarHTPIdpkPkRytrNJjuqhTYqrQWzTIgzO_gvvCkQ1ctCOKqlFlhe3dJnbbS47Ch6Q5g0FzXNfzstIItPlhv21eYFmgpFrnxttS42G0SJ39Dhdeo_HWLQFxQHlM9qZE0D6ZzUzsDNFbAFl1rCl2HrLqtqEecUBW7v7b6SulH2BwT6_FoMwvuktxxuTOMvDy_d3BSy_lBFOyd9jK3L5OUFjmXhCWPgeCyB_lrWB3SfC8YHSzph-avH4MBmSGekbO0GZKyBVs4qDm1",
		"v1.hYkMvAi76SjbmTz_20iqJ8Gy2ymM5E_P5d_hGV0DRyqUIcsIj5vttpuuS1hPQajbWquO1zhps3H-c7Ct4VZ6G2sEnXh0-6lX-fRbFwmRpp_hn3Xqcqb07lBKMvkwkrqMWxXm5Ud74y7iTKPqOd0xdPwDgYbTmRDrtROgOmQnneS2i5wKqtDZCM6e_hsmC85hFP0UG9k507AFNhaFuA",
	}
}

// fuzzRing is the key ring of a boundary with Keys fuzzKeyOne, fuzzKeyTwo.
func fuzzRing(t testing.TB) *statetoken.Ring {
	r, err := statetoken.NewRing([][]byte{[]byte(fuzzKeyOne), []byte(fuzzKeyTwo)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// genuineSet returns the committed tokens. Tokens sealed in this process
// cannot join it: fuzzing runs the target in worker processes, each of which
// would seal different tokens (random nonces).
func genuineSet() map[string]bool {
	set := map[string]bool{}
	for _, tok := range committedTokens() {
		set[tok] = true
	}
	return set
}

// checkOpen is the property both Open targets share: Open never panics, it
// accepts only genuine tokens (so no re-spelling of one is accepted), what it
// accepts re-seals to the same claims, and its errors are the documented
// sentinels and never echo the token.
func checkOpen(t *testing.T, r *statetoken.Ring, genuine map[string]bool, tok string) {
	c, _, err := r.Open(tok)
	if err != nil {
		if !errors.Is(err, statetoken.ErrMalformed) && !errors.Is(err, statetoken.ErrUnknownKey) && !errors.Is(err, statetoken.ErrAuth) {
			t.Fatalf("Open error %v is no documented sentinel", err)
		}
		if body := strings.TrimPrefix(tok, "v1."); len(body) >= 12 && strings.Contains(err.Error(), body[:12]) {
			t.Fatalf("Open error echoes the token: %v", err)
		}
		if genuine[tok] {
			t.Fatalf("Open refused a genuine token: %v", err)
		}
		return
	}
	if !genuine[tok] {
		t.Fatalf("Open accepted a token that was never sealed: %q", tok)
	}
	again, err := r.Seal(c)
	if err != nil {
		t.Fatalf("re-seal: %v", err)
	}
	c2, _, err := r.Open(again)
	if err != nil || !reflect.DeepEqual(c, c2) {
		t.Fatalf("re-sealed claims differ: %+v vs %+v (%v)", c, c2, err)
	}
}

// FuzzOpen feeds arbitrary token text to statetoken's Ring.Open, the first
// thing the boundary does with a requestState.
func FuzzOpen(f *testing.F) {
	r := fuzzRing(f)
	genuine := genuineSet()
	for tok := range genuine {
		f.Add(tok)
		f.Add(tok[:len(tok)-1])
		f.Add(tok + "=")
		f.Add(tok[:10] + "\r\n" + tok[10:])
		f.Add("v2." + tok[3:])
		f.Add(strings.ToUpper(tok[:1]) + tok[1:])
		f.Add(strings.ReplaceAll(strings.ReplaceAll(tok, "-", "+"), "_", "/"))
	}
	f.Add("")
	f.Add("v1.")
	f.Add("v1.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		checkOpen(t, r, genuine, tok)
	})
}

// FuzzOpenRaw feeds arbitrary decoded token bytes (key id, nonce,
// ciphertext, tag), canonically encoded, to Ring.Open: it reaches the
// AEAD and claims decoding that FuzzOpen's text mutations rarely get past.
func FuzzOpenRaw(f *testing.F) {
	r := fuzzRing(f)
	genuine := genuineSet()
	one, two := committedTokens()[0], committedTokens()[3]
	for tok := range genuine {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "v1."))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
		f.Add(raw[:len(raw)-1])
		flipped := bytes.Clone(raw)
		flipped[len(raw)/2] ^= 1
		f.Add(flipped)
	}
	// A token of key two relabelled with key one's id.
	rawOne, _ := base64.RawURLEncoding.DecodeString(one[3:])
	rawTwo, _ := base64.RawURLEncoding.DecodeString(two[3:])
	f.Add(append(bytes.Clone(rawOne[:4]), rawTwo[4:]...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkOpen(t, r, genuine, "v1."+base64.RawURLEncoding.EncodeToString(raw))
	})
}

// surrogateEscape finds \u escapes of UTF-16 surrogates, which
// encoding/json decodes lossily (to U+FFFD).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// clean reports whether encoding/json decodes data without loss: valid
// UTF-8 and no surrogate escapes.
func clean(data []byte) bool { return utf8.Valid(data) && !surrogateEscape.Match(data) }

// inspect reports, using encoding/json's tokenizer as an independent parser,
// whether valid JSON data has a duplicate object key and how deep it nests.
func inspect(data []byte) (dup bool, depth int) {
	type frame struct {
		obj     bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return dup, depth
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			k := tok.(string)
			dup = dup || stack[n-1].keys[k]
			stack[n-1].keys[k] = true
			stack[n-1].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
		depth = max(depth, len(stack))
	}
}

// decode is encoding/json's reading of arguments, with numbers kept exact;
// absent and null become the empty object.
func decode(t *testing.T, data []byte) any {
	if len(data) == 0 {
		return map[string]any{}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json rejects what ArgumentsDigest accepted: %v", err)
	}
	if v == nil {
		return map[string]any{}
	}
	return v
}

func digest(t *testing.T, data []byte) (string, bool) {
	d, err := requeststate.ArgumentsDigest(data)
	if err != nil {
		if !errors.Is(err, requeststate.ErrArguments) {
			t.Fatalf("error %v does not wrap ErrArguments", err)
		}
		return "", false
	}
	return d, true
}

// checkDigest checks one input against encoding/json and returns its digest.
func checkDigest(t *testing.T, a []byte) (string, bool) {
	d, ok := digest(t, a)
	valid := len(a) == 0 || json.Valid(a)
	if !ok {
		// Valid JSON is refused only for a duplicate key or excess depth;
		// a duplicate by our decoding is also one by encoding/json's.
		if valid {
			if dup, depth := inspect(a); !dup && depth <= requeststate.MaxDepth {
				t.Fatalf("refused valid JSON without duplicates at depth %d: %q", depth, a)
			}
		}
		return "", false
	}
	if !valid {
		t.Fatalf("accepted invalid JSON %q", a)
	}
	c, err := requeststate.CanonicalArguments(a)
	if err != nil {
		t.Fatalf("CanonicalArguments fails where ArgumentsDigest succeeds: %v", err)
	}
	if sum := sha256.Sum256(c); hex.EncodeToString(sum[:]) != d {
		t.Fatal("digest is not SHA-256 of the canonical form")
	}
	if !json.Valid(c) {
		t.Fatalf("canonical form is not JSON: %q", c)
	}
	if c2, err := requeststate.CanonicalArguments(c); err != nil || !bytes.Equal(c, c2) {
		t.Fatalf("canonical form is not a fixpoint: %q -> %q (%v)", c, c2, err)
	}
	// Whitespace never matters.
	var ind bytes.Buffer
	if len(a) > 0 {
		if err := json.Indent(&ind, a, " \r", "\t "); err != nil {
			t.Fatal(err)
		}
		if di, _ := digest(t, ind.Bytes()); di != d {
			t.Fatalf("indenting changed the digest of %q", a)
		}
	}
	if clean(a) {
		if dup, depth := inspect(a); dup || depth > requeststate.MaxDepth {
			t.Fatalf("accepted duplicate keys or depth %d: %q", depth, a)
		}
		// encoding/json, numbers kept exact, agrees on meaning: its
		// re-encoding has the same digest.
		re, err := json.Marshal(decode(t, a))
		if err != nil {
			t.Fatal(err)
		}
		if dr, _ := digest(t, re); dr != d {
			t.Fatalf("encoding/json re-encoding %q of %q has another digest", re, a)
		}
	}
	return d, true
}

// FuzzArgumentsDigest checks ArgumentsDigest against encoding/json on pairs
// of inputs: it never panics, accepts only JSON, refuses valid JSON only for
// duplicates or depth, ignores whitespace and key order, and on inputs that
// encoding/json reads without loss, two digests are equal exactly when
// encoding/json (numbers exact) reads equal values.
func FuzzArgumentsDigest(f *testing.F) {
	for _, pair := range [][2]string{
		{``, `null`},
		{`{}`, ` { } `},
		{`{"a":1,"b":[true,false,null]}`, `{"b":[true,false,null],"a":1}`},
		{`{"n":10000000000000000000001}`, `{"n":1e22}`},
		{`{"n":1}`, `{"n":1.0}`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"s":"\ud800"}`, `{"s":"\ufffd"}`},
		{"{\"s\":\"\xff\"}", "{\"s\":\"\uFFFD\"}"},
		{`{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
		{`{"s":"\u0061\/\"\\\b\f\n\r\t\u0001"}`, `{"s":"a/\"\\\b\f\n\r\t\u0001"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{"a":1,"\u0061":2}`, `{"a":1}`},
		{`[[[[[]]]]]`, `[{"x":{"y":[1,2,{"z":"w"}]}}]`},
		{`{"a":"<>&\u2028"}`, `{"a":"\u003c\u003e\u0026\u2028"}`},
		{`01`, `1 2`},
		{`{"a":1}x`, `"\x"`},
		{strings.Repeat("[", 129) + strings.Repeat("]", 129), strings.Repeat("[", 128) + strings.Repeat("]", 128)},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		da, okA := checkDigest(t, a)
		db, okB := checkDigest(t, b)
		if !okA || !okB || !clean(a) || !clean(b) {
			return
		}
		if same := reflect.DeepEqual(decode(t, a), decode(t, b)); same != (da == db) {
			t.Fatalf("encoding/json equal=%v but digests equal=%v: %q vs %q", same, da == db, a, b)
		}
	})
}

// TestRequestStateFuzzOracles are the known-broken controls for the oracles
// above: each would catch the flaw it is there for.
func TestRequestStateFuzzOracles(t *testing.T) {
	// base64 Strict() decoding alone accepts a re-spelled token: a naive Open
	// would accept it, and the genuine-set oracle would flag it.
	tok := committedTokens()[0]
	respelled := tok[:10] + "\r\n" + tok[10:]
	a, errA := base64.RawURLEncoding.Strict().DecodeString(tok[3:])
	b, errB := base64.RawURLEncoding.Strict().DecodeString(respelled[3:])
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Fatalf("Strict() no longer skips CR LF (%v, %v); control is stale", errA, errB)
	}
	genuine := genuineSet()
	if genuine[respelled] || !genuine[tok] {
		t.Fatal("genuine set does not tell the spellings apart")
	}
	// inspect finds duplicates and depth.
	for _, tt := range []struct {
		in    string
		dup   bool
		depth int
	}{
		{`{"a":1,"a":2}`, true, 1},
		{`{"a":1,"b":{"a":2}}`, false, 2},
		{`[{"x":[{"y":1,"y":2}]}]`, true, 4},
		{`{"a":[],"b":{}}`, false, 2},
		{`1`, false, 0},
	} {
		if dup, depth := inspect([]byte(tt.in)); dup != tt.dup || depth != tt.depth {
			t.Errorf("inspect(%s) = %v, %d; want %v, %d", tt.in, dup, depth, tt.dup, tt.depth)
		}
	}
	// clean spots what encoding/json decodes lossily.
	for in, want := range map[string]bool{`"a"`: true, `"\ud800"`: false, `"\uDC00"`: false, "\"\xff\"": false, `"\u00e9"`: true} {
		if clean([]byte(in)) != want {
			t.Errorf("clean(%q) != %v", in, want)
		}
	}
}
