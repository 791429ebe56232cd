package proxy_test

import (
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/rapidtest"
)

// The property tests below compare Policy.Decide with a reference written
// from the documented rules alone: a backtracking glob matcher over
// characters, MCP's naming rule, and "deny, then ask, then allow".

// alphabet is what random names and patterns are made of: letters of both
// cases, the characters that path.Match or the naming rule treat apart
// ('/', '.', '_', '-'), non-ASCII letters (one a look-alike of 'e'), an
// invisible character, a space, and the glob's own metacharacters.
var alphabet = []rune{'a', 'b', 'A', '/', '.', '_', '-', 'é', 'е', '日', '\u200b', ' ', '*', '?', '[', ']', '\\'}

// policySpec is a randomly drawn policy.
type policySpec struct {
	deflt            string // "ask" or "deny"
	allow, ask, deny []string
}

func (p policySpec) toml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "default = %q\n", p.deflt)
	for _, l := range []struct {
		key  string
		pats []string
	}{{"allow", p.allow}, {"ask", p.ask}, {"deny", p.deny}} {
		quoted := make([]string, len(l.pats))
		for i, pat := range l.pats {
			quoted[i] = tomlString(pat)
		}
		fmt.Fprintf(&b, "%s = [%s]\n", l.key, strings.Join(quoted, ", "))
	}
	return b.String()
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, `\u%04X`, r)
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// escapeGlob is the pattern that matches exactly s.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// A token is one piece of a drawn pattern: the pattern's text, and how to
// draw a piece of name it matches.
type token struct {
	text     string
	instance func(t *rapid.T) string
}

// anyChar draws a character a wildcard matches, '/' one time in four.
func anyChar(t *rapid.T) string {
	if rapid.IntRange(0, 3).Draw(t, "slash") == 0 {
		return "/"
	}
	return string(rapid.SampledFrom(alphabet).Draw(t, "char"))
}

func drawToken(t *rapid.T) token {
	switch rapid.IntRange(0, 7).Draw(t, "token") {
	case 0:
		return token{"*", func(t *rapid.T) string {
			n := rapid.IntRange(0, 3).Draw(t, "span")
			var b strings.Builder
			for range n {
				b.WriteString(anyChar(t))
			}
			return b.String()
		}}
	case 1:
		return token{"?", anyChar}
	case 2:
		return token{"[a/é]", func(t *rapid.T) string { return rapid.SampledFrom([]string{"a", "/", "é"}).Draw(t, "member") }}
	case 3:
		return token{"[^a]", func(t *rapid.T) string { return rapid.SampledFrom([]string{"b", "/", ".", "日"}).Draw(t, "other") }}
	case 4:
		return token{"[a-c]", func(t *rapid.T) string { return rapid.SampledFrom([]string{"a", "b"}).Draw(t, "inrange") }}
	default:
		c := anyChar(t)
		return token{escapeGlob(c), func(*rapid.T) string { return c }}
	}
}

// drawPattern draws a pattern and a function drawing names it matches.
func drawPattern(t *rapid.T) (string, func(*rapid.T) string) {
	if rapid.IntRange(0, 4).Draw(t, "exact") == 0 {
		name := drawName(t)
		if name == "" {
			name = "a"
		}
		return escapeGlob(name), func(*rapid.T) string { return name }
	}
	n := rapid.IntRange(1, 4).Draw(t, "tokens")
	toks := make([]token, n)
	var b strings.Builder
	for i := range toks {
		toks[i] = drawToken(t)
		b.WriteString(toks[i].text)
	}
	return b.String(), func(t *rapid.T) string {
		var s strings.Builder
		for _, tok := range toks {
			s.WriteString(tok.instance(t))
		}
		return s.String()
	}
}

func drawName(t *rapid.T) string {
	switch rapid.IntRange(0, 9).Draw(t, "nameKind") {
	case 0:
		return strings.Repeat("a", rapid.IntRange(127, 129).Draw(t, "long"))
	case 1, 2, 3:
		valid := []rune{'a', 'b', 'A', '.', '_', '-', '0'}
		return string(rapid.SliceOfN(rapid.SampledFrom(valid), 0, 6).Draw(t, "valid"))
	}
	return string(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 6).Draw(t, "name"))
}

// refMatch is the reference matcher: pat matches the whole of name.
func refMatch(pat, name []rune) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	switch pat[0] {
	case '*':
		for i := 0; i <= len(name); i++ {
			if refMatch(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	case '?':
		return len(name) > 0 && refMatch(pat[1:], name[1:])
	case '\\':
		return len(name) > 0 && name[0] == pat[1] && refMatch(pat[2:], name[1:])
	case '[':
		end, in := refClass(pat[1:])
		return len(name) > 0 && in(name[0]) && refMatch(pat[1+end:], name[1:])
	}
	return len(name) > 0 && name[0] == pat[0] && refMatch(pat[1:], name[1:])
}

// refClass reads the class after its '[' and returns how many characters
// it took, its ']' included, and whether a character is in it.
func refClass(p []rune) (int, func(rune) bool) {
	neg := len(p) > 0 && p[0] == '^'
	i := 0
	if neg {
		i++
	}
	type span struct{ lo, hi rune }
	var spans []span
	char := func() rune {
		if p[i] == '\\' {
			i++
		}
		i++
		return p[i-1]
	}
	for p[i] != ']' || len(spans) == 0 {
		lo := char()
		hi := lo
		if p[i] == '-' {
			i++
			hi = char()
		}
		spans = append(spans, span{lo, hi})
	}
	return i + 1, func(r rune) bool {
		for _, s := range spans {
			if s.lo <= r && r <= s.hi {
				return !neg
			}
		}
		return neg
	}
}

// refLiteral is what a pattern without * ? or [ matches.
func refLiteral(pat string) (string, bool) {
	var b strings.Builder
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '*', '?', '[':
			return "", false
		case '\\':
			i++
		}
		b.WriteRune(rs[i])
	}
	return b.String(), true
}

// refDecide is the documented decision, matching with match.
func refDecide(p policySpec, name string, match func(pat, name string) bool) proxy.Action {
	valid := name != "" && utf8.RuneCountInString(name) <= 128
	for _, r := range name {
		valid = valid && (r == '_' || r == '-' || r == '.' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}
	named := false
	for _, l := range [][]string{p.allow, p.ask, p.deny} {
		for _, pat := range l {
			if lit, ok := refLiteral(pat); ok && lit == name {
				named = true
			}
		}
	}
	anyOf := func(l []string) bool {
		for _, pat := range l {
			if match(pat, name) {
				return true
			}
		}
		return false
	}
	switch {
	case !valid && !named:
		return proxy.Deny
	case anyOf(p.deny):
		return proxy.Deny
	case anyOf(p.ask):
		return proxy.Ask
	case anyOf(p.allow):
		return proxy.Allow
	case p.deflt == "deny":
		return proxy.Deny
	}
	return proxy.Ask
}

func reference(pat, name string) bool { return refMatch([]rune(pat), []rune(name)) }

// mostRestrictiveWins is the property: for random policies and names (many
// drawn to match one of the policy's patterns), decide agrees with the
// reference decision.
func mostRestrictiveWins(decide func(t *rapid.T, p policySpec, name string) proxy.Action) func(*rapid.T) {
	return func(t *rapid.T) {
		p := policySpec{deflt: rapid.SampledFrom([]string{"ask", "deny"}).Draw(t, "default")}
		var instances []func(*rapid.T) string
		for _, l := range []*[]string{&p.allow, &p.ask, &p.deny} {
			for range rapid.IntRange(0, 3).Draw(t, "patterns") {
				pat, inst := drawPattern(t)
				*l = append(*l, pat)
				instances = append(instances, inst)
			}
		}
		for range 8 {
			name := drawName(t)
			if len(instances) > 0 && rapid.Bool().Draw(t, "matching") {
				name = rapid.SampledFrom(instances).Draw(t, "of")(t)
			}
			// Often the name is named exactly too, in any list, as an
			// operator lets a name outside the naming rule in.
			q := policySpec{p.deflt, slices.Clone(p.allow), slices.Clone(p.ask), slices.Clone(p.deny)}
			if name != "" && rapid.Bool().Draw(t, "nameIt") {
				l := rapid.SampledFrom([]*[]string{&q.allow, &q.allow, &q.ask, &q.deny}).Draw(t, "in")
				*l = append(*l, escapeGlob(name))
			}
			want := refDecide(q, name, reference)
			if got := decide(t, q, name); got != want {
				t.Fatalf("policy\n%sDecide(%q) = %v, the rules say %v", q.toml(), name, got, want)
			}
		}
	}
}

// policyDecide is Policy.Decide on the drawn policy, parsed from TOML.
func policyDecide(t *rapid.T, p policySpec, name string) proxy.Action {
	pol, err := proxy.ParsePolicy(strings.NewReader(p.toml()))
	if err != nil {
		t.Fatalf("ParsePolicy:\n%s%v", p.toml(), err)
	}
	if pol.Hidden(name) != (pol.Decide(name, nil) == proxy.Deny) {
		t.Fatalf("Hidden(%q) disagrees with Decide", name)
	}
	return pol.Decide(name, nil)
}

// TestPolicyMostRestrictiveWins: whatever the names (with '/', '.', case,
// non-ASCII, look-alikes, invisible characters, glob metacharacters) and
// the pattern lists, Policy.Decide is the most restrictive list whose glob
// matches the whole name, the default otherwise, and deny for a name
// outside MCP's naming rule that no list names exactly.
// TestPolicyPropertyCatchesPathMatch is its negative control.
func TestPolicyMostRestrictiveWins(t *testing.T) {
	rapidtest.OutOfTree(t)
	rapid.Check(t, mostRestrictiveWins(policyDecide))
}

// pathMatchDecide is the decision with path.Match as the matcher (as the
// proxy had it): '*', '?' and [^…] never match '/'.
func pathMatchDecide(_ *rapid.T, p policySpec, name string) proxy.Action {
	return refDecide(p, name, func(pat, name string) bool {
		ok, _ := path.Match(pat, name)
		return ok
	})
}

// ruleRecorder is a rapid.TB that records a failure instead of failing the
// test.
type ruleRecorder struct {
	*testing.T
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *ruleRecorder) Name() string { return r.T.Name() + "_control" }
func (r *ruleRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *ruleRecorder) Error(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *ruleRecorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *ruleRecorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *ruleRecorder) Fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *ruleRecorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *ruleRecorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *ruleRecorder) Log(args ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	r.mu.Unlock()
}
func (r *ruleRecorder) Logf(format string, args ...any) { r.Log(fmt.Sprintf(format, args...)) }

var failedName = regexp.MustCompile(`Decide\(("[^"]*")\) = \w+, the rules say`)

// TestPolicyPropertyCatchesPathMatch: the property of
// TestPolicyMostRestrictiveWins, run against the decision with path.Match
// as its matcher, fails, on a name with '/'.
func TestPolicyPropertyCatchesPathMatch(t *testing.T) {
	rapidtest.OutOfTree(t)
	// One search of rapid's may draw no failing case (measured at -short's
	// 20 checks: 1 in 10 missed before '/' was drawn more often, 0 in 40
	// since): search again, up to a bound.
	const searches = 20
	var r *ruleRecorder
	n := 0
	for ; n < searches && (r == nil || !r.Failed()); n++ {
		r = &ruleRecorder{T: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			rapid.Check(r, mostRestrictiveWins(pathMatchDecide))
		}()
		<-done
	}
	out := strings.Join(r.msgs, "\n")
	if !r.Failed() {
		t.Fatalf("the property passed path.Match in %d searches", searches)
	}
	m := failedName.FindStringSubmatch(out)
	if m == nil || !strings.Contains(m[1], "/") {
		t.Fatalf("the property failed path.Match, but not on a name with '/':\n%s", out)
	}
	t.Logf("caught in search %d:\n%s", n, out)
}
