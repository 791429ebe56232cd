package proxy

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
// Rules are globs on the tool name ([path.Match] syntax: * ? [a-z] and \
// escapes; tool names have no '/'). When several lists match a name, the
// most restrictive wins: deny, then ask, then allow. A tool no rule names is
// asked, or denied with default = "deny"; it is allowed without a question
// only if the operator set allow_read_only_hint and the upstream marks the
// tool readOnlyHint (and not destructiveHint), because the specification
// tells clients to treat annotations from untrusted servers as untrusted.
type Policy struct {
	name              string
	deflt             Action
	allowReadOnlyHint bool
	allow, ask, deny  []string
	questions         map[string]template
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
// Every error names the line or the key at fault and wraps [ErrPolicy]:
// unknown keys, wrong types, bad globs, an empty or unknown default, a
// template with unbalanced braces, a placeholder that is not an argument
// name, or text a person could misread (see [Policy.Question]).
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
		return nil, fmt.Errorf("%w: unknown key %s (known: name, default, allow_read_only_hint, allow, ask, deny, questions)", ErrPolicy, strings.Join(keys, ", "))
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
		into *[]string
	}{{"allow", f.Allow, &p.allow}, {"ask", f.Ask, &p.ask}, {"deny", f.Deny, &p.deny}} {
		for i, g := range l.in {
			if g == "" {
				return nil, fmt.Errorf("%w: %s[%d] is empty", ErrPolicy, l.key, i)
			}
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("%w: %s[%d] = %q: bad glob: %v", ErrPolicy, l.key, i, g, err)
			}
			*l.into = append(*l.into, g)
		}
	}
	for _, tool := range slices.Sorted(mapKeys(f.Questions)) {
		t, err := parseTemplate(f.Questions[tool])
		if err != nil {
			return nil, fmt.Errorf("%w: questions.%s: %v", ErrPolicy, tool, err)
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
	if p == nil {
		return Ask
	}
	switch {
	case matchAny(p.deny, name):
		return Deny
	case matchAny(p.ask, name):
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

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok { // patterns were validated
			return true
		}
	}
	return false
}

// Check reports policy templates that name arguments the upstream's current
// definition of their tool does not have. The proxy runs it at start-up,
// against the tools the upstream lists then.
func (p *Policy) Check(tools []*mcp.Tool) error {
	if p == nil {
		return nil
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
