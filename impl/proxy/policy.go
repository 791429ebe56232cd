package proxy

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// An Action is what the proxy does with a tools/call.
type Action uint8

const (
	// Ask: the person confirms this exact call, once, before it is forwarded.
	Ask Action = iota
	// Allow: the call is forwarded unchanged, without a question.
	Allow
	// Deny: the tool is hidden from tools/list and every call is refused.
	Deny
)

func (a Action) String() string {
	switch a {
	case Ask:
		return "ask"
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// ErrPolicy reports a policy file the proxy refuses to start with.
var ErrPolicy = errors.New("proxy: invalid policy")

// DefaultUpstreamName names the upstream in questions when the policy does
// not.
const DefaultUpstreamName = "upstream"

// maxTemplateLen bounds a question template, in bytes.
const maxTemplateLen = 300

// A Policy decides, per tool name, whether a call is asked, allowed or
// denied. The zero value asks for every tool. A Policy is immutable once
// parsed and safe for concurrent use.
//
// Rules are globs matched against the whole tool name, case-sensitively,
// one character being one Unicode code point:
//
//	pattern  matches
//	*        any run of characters, the empty one included, '/' and '.' too
//	?        any one character
//	[abc]    one of the characters listed; [a-z] a range; [^a-z] any other
//	\x       the character x itself (\* \? \[ \\ \- \] …)
//
// Every other character stands for itself. Unlike [path.Match], '/' is an
// ordinary character: "github/*" matches "github/a/b", and "*delete*"
// matches "github/delete_repo".
//
// When several lists match a name, the most restrictive wins: deny, then
// ask, then allow. A tool no rule names is asked, or denied with default =
// "deny"; it is allowed without a question only if the operator set
// allow_read_only_hint and the upstream marks the tool readOnlyHint (and
// not destructiveHint), because the specification tells clients to treat
// annotations from untrusted servers as untrusted.
//
// A name outside MCP's naming rule — 1 to 128 characters, each an ASCII
// letter, digit, '_', '-' or '.' — is denied (hidden and refused) unless a
// list names it exactly, with a pattern that has no * ? or [: such a
// name (a look-alike letter, an invisible character, a space, a '/') can
// slip past globs written for the names the operator saw. Named exactly,
// it is decided as any other name, the most restrictive matching list
// winning.
type Policy struct {
	name              string
	deflt             Action
	allowReadOnlyHint bool
	allow, ask, deny  []glob
	questions         map[string]template
	approvals         []approvalRule
}

// An approvalRule is one [[approval]] table: the tools whose calls need
// its out-of-band approval.
type approvalRule struct {
	tools    []glob
	approval confirm.Approval
}

// policyFile is the TOML a policy file holds.
type policyFile struct {
	Name              string            `toml:"name"`
	Default           string            `toml:"default"`
	AllowReadOnlyHint bool              `toml:"allow_read_only_hint"`
	Allow             []string          `toml:"allow"`
	Ask               []string          `toml:"ask"`
	Deny              []string          `toml:"deny"`
	Questions         map[string]string `toml:"questions"`
	Approval          []approvalFile    `toml:"approval"`
}

// approvalFile is one [[approval]] table of a policy file.
type approvalFile struct {
	Tools     []string `toml:"tools"`
	Mode      string   `toml:"mode"`
	Approvers []string `toml:"approvers"`
	Approvals *int     `toml:"approvals"`
}

// ParsePolicy reads a policy in TOML:
//
//	name = "filesystem"                  # the upstream's name in every question
//	default = "ask"                      # tools no rule names: "ask" (default) or "deny"
//	allow_read_only_hint = false         # allow tools the upstream marks readOnlyHint
//	allow = ["read_*", "list_*"]         # forwarded without a question
//	ask = ["write_file"]                 # asked every time (the default anyway)
//	deny = ["create_directory"]          # hidden and refused
//
//	[questions]                          # optional first line of a tool's question
//	write_file = "Write {content} to {path}?"
//
//	[[approval]]                         # approvers the agent cannot be (any number of tables)
//	tools = ["delete_*", "move_file"]    # globs, as in the lists above
//	mode = "out-of-band"                 # "out-of-band", or "both" (in band as well)
//	approvers = ["group:ops", "sub:alice"]  # who may approve: OpenID Connect subjects and groups
//	approvals = 2                        # distinct approvers needed (default 1), never the caller
//
// A tool an [[approval]] table names is asked (unless denied), and its
// calls need that approval out of band, besides (mode "both") or instead
// of (mode "out-of-band") the person's in-band answer, which the client
// relays: see package confirm. A tool no table names is approved in
// band. Tables must not overlap: a tool two tables name is refused at
// start-up if the upstream lists it then, and every call of it is
// refused if it appears later.
//
// Every error names the line or the key at fault and wraps [ErrPolicy]:
// unknown keys, wrong types, bad globs, an empty or unknown default, a
// template with unbalanced braces, a placeholder that is not an argument
// name, text a person could misread (see [Policy.Question]), or an
// [[approval]] table without tools, with another mode, with approvers not
// named sub:… or group:…, or needing more approvals than it could get.
func ParsePolicy(r io.Reader) (*Policy, error) {
	var f policyFile
	md, err := toml.NewDecoder(r).Decode(&f)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, fmt.Errorf("%w: line %d: %s", ErrPolicy, perr.Position.Line, perr.Message)
		}
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	// A misspelt key ("alow") must not silently leave tools asked or, worse,
	// a deny list unread.
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%w: unknown key %s (known: name, default, allow_read_only_hint, allow, ask, deny, questions, approval)", ErrPolicy, strings.Join(keys, ", "))
	}
	p := &Policy{name: f.Name, allowReadOnlyHint: f.AllowReadOnlyHint, questions: map[string]template{}}
	if md.IsDefined("name") {
		if err := checkOperatorText(f.Name); err != nil {
			return nil, fmt.Errorf("%w: name: %v", ErrPolicy, err)
		}
	}
	switch f.Default {
	case "", "ask":
		p.deflt = Ask
	case "deny":
		p.deflt = Deny
	default:
		// "allow" would forward every unnamed tool, including ones the
		// upstream adds later, without a question.
		return nil, fmt.Errorf("%w: default = %q: want \"ask\" or \"deny\" (allow tools by name or glob instead)", ErrPolicy, f.Default)
	}
	for _, l := range []struct {
		key  string
		in   []string
		into *[]glob
	}{{"allow", f.Allow, &p.allow}, {"ask", f.Ask, &p.ask}, {"deny", f.Deny, &p.deny}} {
		for i, g := range l.in {
			if g == "" {
				return nil, fmt.Errorf("%w: %s[%d] is empty", ErrPolicy, l.key, i)
			}
			c, err := compileGlob(g)
			if err != nil {
				return nil, fmt.Errorf("%w: %s[%d] = %q: bad glob: %v", ErrPolicy, l.key, i, g, err)
			}
			*l.into = append(*l.into, c)
		}
	}
	for i, a := range f.Approval {
		r, err := parseApproval(a)
		if err != nil {
			return nil, fmt.Errorf("%w: approval table %d: %v", ErrPolicy, i+1, err)
		}
		p.approvals = append(p.approvals, r)
	}
	for _, tool := range slices.Sorted(mapKeys(f.Questions)) {
		t, err := parseTemplate(f.Questions[tool])
		if err != nil {
			return nil, fmt.Errorf("%w: questions.%s: %v", ErrPolicy, tool, err)
		}
		if p.outsideNamingRule(tool) {
			return nil, fmt.Errorf("%w: questions.%s: the name is outside MCP's naming rule, so the tool is denied unless allow or ask names it exactly", ErrPolicy, tool)
		}
		if p.Decide(tool, nil) == Deny {
			return nil, fmt.Errorf("%w: questions.%s: the tool is denied, so it is never asked", ErrPolicy, tool)
		}
		p.questions[tool] = t
	}
	return p, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Name returns the upstream's name as the operator wrote it, or
// [DefaultUpstreamName].
func (p *Policy) Name() string {
	if p == nil || p.name == "" {
		return DefaultUpstreamName
	}
	return p.name
}

// Decide returns the action for a call of the named tool. def is the
// upstream's current definition of it, or nil when unknown; only its
// annotations are read, and only with allow_read_only_hint.
func (p *Policy) Decide(name string, def *mcp.Tool) Action {
	// A look-alike or invisible character, a space or a '/' can carry a
	// name past globs written for the names the operator saw.
	if p.outsideNamingRule(name) {
		return Deny
	}
	if p == nil {
		return Ask
	}
	switch {
	case matchAny(p.deny, name):
		return Deny
	// Out-of-band approval is asking too: an [[approval]] table must not
	// be undone by an allow list.
	case matchAny(p.ask, name) || p.needsApproval(name):
		return Ask
	case matchAny(p.allow, name):
		return Allow
	case p.deflt == Deny:
		return Deny
	case p.allowReadOnlyHint && readOnly(def):
		return Allow
	}
	return Ask
}

// Hidden reports whether tools/list must hide the tool: denied by name. A
// tool denied only by default = "deny" is hidden as well.
func (p *Policy) Hidden(name string) bool { return p.Decide(name, nil) == Deny }

// readOnly reports whether the upstream says the tool changes nothing.
func readOnly(def *mcp.Tool) bool {
	if def == nil || def.Annotations == nil || !def.Annotations.ReadOnlyHint {
		return false
	}
	d := def.Annotations.DestructiveHint
	return d == nil || !*d
}

func matchAny(globs []glob, name string) bool {
	for _, g := range globs {
		// A literal pattern's expression matches exactly its text: a
		// comparison says the same without running it (on every call).
		if g.literal && g.exact == name || !g.literal && g.re.MatchString(name) {
			return true
		}
	}
	return false
}

// maxToolName is the longest name MCP's naming rule allows, in characters.
const maxToolName = 128

// followsNamingRule reports whether name follows MCP's tool naming rule
// (specification 2025-11-25, SEP-986): 1 to 128 characters, each an ASCII
// letter, digit, '_', '-' or '.'.
func followsNamingRule(name string) bool {
	if name == "" || len(name) > maxToolName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// outsideNamingRule reports whether name is denied for breaking MCP's
// naming rule: it does, and no list names it exactly.
func (p *Policy) outsideNamingRule(name string) bool {
	if followsNamingRule(name) {
		return false
	}
	if p == nil {
		return true
	}
	for _, l := range [][]glob{p.allow, p.ask, p.deny} {
		for _, g := range l {
			if g.literal && g.exact == name {
				return false
			}
		}
	}
	return true
}

// A glob is one compiled policy pattern (see [Policy] for the syntax).
type glob struct {
	re      *regexp.Regexp // the whole name; RE2 matches in linear time
	literal bool           // no * ? or [: it matches exact alone
	exact   string
}

// compileGlob translates a pattern into an anchored regular expression.
// Its class syntax is path.Match's: [^…], ranges lo-hi with lo <= hi, and
// - ] \ escaped inside a class.
func compileGlob(g string) (glob, error) {
	if !utf8.ValidString(g) {
		return glob{}, errors.New("not valid UTF-8")
	}
	rs := []rune(g)
	var (
		re    strings.Builder
		exact strings.Builder
	)
	literal := true
	re.WriteString(`\A(?s:`)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			literal = false
			re.WriteString(`.*`)
		case '?':
			literal = false
			re.WriteString(`.`)
		case '\\':
			i++
			if i == len(rs) {
				return glob{}, errors.New("\\ at the end escapes nothing")
			}
			re.WriteString(regexp.QuoteMeta(string(rs[i])))
			exact.WriteRune(rs[i])
		case '[':
			literal = false
			n, err := compileClass(rs[i+1:], &re)
			if err != nil {
				return glob{}, err
			}
			i += n
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
			exact.WriteRune(c)
		}
	}
	re.WriteString(`)\z`)
	compiled, err := regexp.Compile(re.String())
	if err != nil {
		return glob{}, err
	}
	return glob{re: compiled, literal: literal, exact: exact.String()}, nil
}

// compileClass translates the class whose text follows its '[' in rs and
// returns how many runes it took, its ']' included.
func compileClass(rs []rune, re *strings.Builder) (int, error) {
	i := 0
	re.WriteByte('[')
	if i < len(rs) && rs[i] == '^' {
		re.WriteByte('^')
		i++
	}
	// char reads one class character, escaped or not.
	char := func() (rune, error) {
		if i == len(rs) {
			return 0, errors.New("[ without its ]")
		}
		c := rs[i]
		switch c {
		case '-', ']':
			return 0, fmt.Errorf("%q in a class must be escaped", c)
		case '\\':
			i++
			if i == len(rs) {
				return 0, errors.New("[ without its ]")
			}
			c = rs[i]
		}
		i++
		return c, nil
	}
	for n := 0; ; n++ {
		if i < len(rs) && rs[i] == ']' && n > 0 {
			re.WriteByte(']')
			return i + 1, nil
		}
		lo, err := char()
		if err != nil {
			return 0, err
		}
		hi := lo
		if i < len(rs) && rs[i] == '-' {
			i++
			if hi, err = char(); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %c-%c is reversed", lo, hi)
			}
		}
		fmt.Fprintf(re, `\x{%x}-\x{%x}`, lo, hi)
	}
}

// Check reports policy templates that name arguments the upstream's current
// definition of their tool does not have, and tools two [[approval]]
// tables name. The proxy runs it at start-up, against the tools the
// upstream lists then.
func (p *Policy) Check(tools []*mcp.Tool) error {
	if p == nil {
		return nil
	}
	for _, t := range tools {
		if _, err := p.Approval(t.Name); err != nil {
			return err
		}
	}
	for _, tool := range slices.Sorted(mapKeys(p.questions)) {
		i := slices.IndexFunc(tools, func(t *mcp.Tool) bool { return t.Name == tool })
		if i < 0 {
			continue // the upstream may add it later; checked at each question
		}
		props := schemaProperties(tools[i].InputSchema)
		for _, arg := range p.questions[tool].args() {
			if !slices.Contains(props, arg) {
				return fmt.Errorf("%w: questions.%s names {%s}, which is not an argument of the upstream's %s (its arguments: %s)",
					ErrPolicy, tool, arg, tool, strings.Join(props, ", "))
			}
		}
	}
	return nil
}

// schemaProperties returns the sorted property names of an input schema as
// the go-sdk client decodes it.
func schemaProperties(schema any) []string {
	m, _ := schema.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	return slices.Sorted(mapKeys(props))
}

// A template is an operator's first line of a question: literal text and
// {argument} placeholders.
type template []templatePart

type templatePart struct {
	text string // literal text, or the argument name when arg
	arg  bool
}

func (t template) args() []string {
	var out []string
	for _, p := range t {
		if p.arg && !slices.Contains(out, p.text) {
			out = append(out, p.text)
		}
	}
	return out
}

// parseTemplate parses "Write {content} to {path}?"; {{ and }} are literal
// braces.
func parseTemplate(s string) (template, error) {
	if err := checkOperatorText(s); err != nil {
		return nil, err
	}
	if len(s) > maxTemplateLen {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), maxTemplateLen)
	}
	var (
		t   template
		lit strings.Builder
	)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && strings.HasPrefix(s[i:], "{{"), c == '}' && strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed { at byte %d", i)
			}
			name := s[i+1 : i+end]
			if !argName(name) {
				return nil, fmt.Errorf("{%s} at byte %d: a placeholder is an argument name (letters, digits, _ - .); write {{ for a literal brace", name, i)
			}
			if lit.Len() > 0 {
				t = append(t, templatePart{text: lit.String()})
				lit.Reset()
			}
			t = append(t, templatePart{text: name, arg: true})
			i += end
		case c == '}':
			return nil, fmt.Errorf("unmatched } at byte %d; write }} for a literal brace", i)
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t = append(t, templatePart{text: lit.String()})
	}
	return t, nil
}

func argName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// checkOperatorText refuses operator text that would show differently from
// what it is, or that could imitate the question's own delimiters: anything
// prompt.Quote would escape (controls, line breaks, bidi and invisible
// characters, « » …).
func checkOperatorText(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if q := prompt.Quote(s); q != s {
		return fmt.Errorf("has characters a person could misread (line breaks, controls, invisible or bidi characters, « » …): written visibly it is %s", q)
	}
	return nil
}

// parseApproval parses one [[approval]] table.
func parseApproval(a approvalFile) (approvalRule, error) {
	var r approvalRule
	if len(a.Tools) == 0 {
		return r, errors.New("tools is empty or missing: name the tools it is for")
	}
	for i, g := range a.Tools {
		if g == "" {
			return r, fmt.Errorf("tools[%d] is empty", i)
		}
		c, err := compileGlob(g)
		if err != nil {
			return r, fmt.Errorf("tools[%d] = %q: bad glob: %v", i, g, err)
		}
		r.tools = append(r.tools, c)
	}
	switch a.Mode {
	case confirm.OutOfBand.String():
		r.approval.Mode = confirm.OutOfBand
	case confirm.Both.String():
		r.approval.Mode = confirm.Both
	default:
		// In band is what every other tool gets: a table saying so would
		// only add an overlap.
		return r, fmt.Errorf("mode = %q: want \"out-of-band\" or \"both\"", a.Mode)
	}
	r.approval.Approvers = a.Approvers
	r.approval.Required = 1
	if a.Approvals != nil {
		if *a.Approvals < 1 {
			return r, fmt.Errorf("approvals = %d: want 1 or more", *a.Approvals)
		}
		r.approval.Required = *a.Approvals
	}
	if err := r.approval.Check(); err != nil {
		return r, errors.New(strings.TrimPrefix(err.Error(), "confirm: "))
	}
	return r, nil
}

// needsApproval reports whether an [[approval]] table names the tool.
func (p *Policy) needsApproval(name string) bool {
	for _, r := range p.approvals {
		if matchAny(r.tools, name) {
			return true
		}
	}
	return false
}

// Approval returns the out-of-band approval calls of the named tool
// need, or nil when no [[approval]] table names it (the person asked in
// band approves it). Two tables naming it is an error wrapping
// [ErrPolicy]: which one the operator meant cannot be told.
func (p *Policy) Approval(name string) (*confirm.Approval, error) {
	if p == nil {
		return nil, nil
	}
	var (
		found *confirm.Approval
		first int
	)
	for i, r := range p.approvals {
		if !matchAny(r.tools, name) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: approval tables %d and %d both name the tool %s; make them name disjoint tools", ErrPolicy, first+1, i+1, prompt.Value(name, prompt.Options{MaxWidth: nameWidth}))
		}
		a := r.approval
		a.Approvers = slices.Clone(a.Approvers)
		found, first = &a, i
	}
	return found, nil
}

// OutOfBand reports whether any [[approval]] table needs out-of-band
// approval: the proxy needs the approval page then.
func (p *Policy) OutOfBand() bool { return p != nil && len(p.approvals) > 0 }
