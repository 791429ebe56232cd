package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/jsonstring"
)

// Display widths of the question's untrusted parts, in columns.
const (
	nameWidth  = 60  // upstream and tool names
	keyWidth   = 40  // argument names
	valueWidth = 120 // argument values
	// maxArguments bounds the arguments one question lists; a call with
	// more is refused before asking, so every argument is always shown.
	maxArguments = 64
)

// errArguments reports arguments the proxy cannot show a person exactly.
var errArguments = errors.New("arguments cannot be shown exactly")

// An argument is one top-level member of a call's canonical arguments.
type argument struct {
	key string
	raw json.RawMessage // canonical JSON of the value
}

// splitArguments splits canonical arguments (requeststate.CanonicalArguments)
// into their members, in canonical (sorted) order. It refuses what a
// question could not show as the upstream will read it: anything but an
// object, more than maxArguments members, and every value prompt.JSON
// refuses to show (bytes that are not UTF-8 and lone UTF-16 surrogates,
// which encoding/json and most upstreams read as U+FFFD, which is not what
// the bytes say), saying where.
func splitArguments(canon []byte) ([]argument, error) {
	if err := prompt.CheckJSON(canon); err != nil {
		return nil, fmt.Errorf("%w: %s", errArguments, strings.TrimPrefix(err.Error(), prompt.ErrJSON.Error()+": "))
	}
	// CheckJSON parsed canon: one valid JSON value, in the canonical form,
	// which has no white space. Only its members' bounds are left to find.
	if canon[0] != '{' {
		return nil, fmt.Errorf("%w: they are not a JSON object", errArguments)
	}
	var args []argument
	for i := 1; canon[i] != '}'; {
		end := stringEnd(canon, i)
		key, err := decodeString(canon[i:end])
		if err != nil || canon[end] != ':' {
			return nil, fmt.Errorf("%w: a malformed member", errArguments)
		}
		i = valueEnd(canon, end+1)
		if len(args) == maxArguments {
			return nil, fmt.Errorf("%w: more than %d arguments", errArguments, maxArguments)
		}
		args = append(args, argument{key: key, raw: canon[end+1 : i]})
		if canon[i] == ',' {
			i++
		}
	}
	return args, nil
}

// stringEnd returns the offset just past the JSON string that starts at
// offset i of the valid JSON b.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		j += k
		backslashes := 0
		for b[j-1-backslashes] == '\\' {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1
		}
	}
}

// valueEnd returns the offset just past the JSON value that starts at
// offset i of the valid, white-space-free JSON b.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	return i
}

// decodeString returns what encoding/json reads from the JSON string q
// (quotes included), valid UTF-8 as CheckJSON leaves it.
func decodeString(q []byte) (string, error) { return jsonstring.UnquoteUTF8(q) }

// kind names the JSON type of an argument's value, as the question says it.
func (a argument) kind() string {
	switch a.raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// show returns the argument's value as the question shows it, every JSON
// type told apart (prompt.JSON): a string between « and » (an absolute
// path component by component), any other value raw and typed by its
// syntax, never between guillemets. A value too long to show whole is cut
// in the middle and followed by its size and a short digest; prompt's
// warnings follow.
func (a argument) show(width int) string {
	if a.raw[0] == '"' {
		if s, err := decodeString(a.raw); err == nil {
			return showValue(s, width)
		}
	}
	// splitArguments checked that prompt.JSON shows every value.
	v, _ := prompt.JSON(a.raw, prompt.Options{MaxWidth: width})
	return withNotes(v, []byte(a.raw), prompt.JSONWarnings(a.raw))
}

// showValue returns s as a delimited, escaped value — an absolute path
// component by component (prompt.Path), anything else whole
// (prompt.Value). When it is too long to show whole, it is cut in the middle
// and followed by its size and a short digest, so a person can tell two long
// values apart and knows that part is hidden; prompt's warnings (hidden
// characters, mixed scripts) follow.
func showValue(s string, width int) string {
	var (
		v     string
		notes []prompt.Warning
	)
	if strings.HasPrefix(s, "/") {
		v, notes = prompt.Path(s, prompt.Options{MaxWidth: width}), prompt.PathWarnings(s)
	} else {
		v, notes = prompt.Value(s, prompt.Options{MaxWidth: width}), prompt.Warnings(s)
	}
	return withNotes(v, []byte(s), notes)
}

// withNotes returns the shown value v of the bytes b, followed, if v was
// cut, by the size and a short digest of b, and by the notes.
func withNotes(v string, b []byte, notes []prompt.Warning) string {
	// Quote escapes every … of the value: a raw one only ever marks a cut.
	if strings.Contains(v, "…") {
		sum := sha256.Sum256(b)
		v += fmt.Sprintf(" (shortened: %d bytes, sha256 %x)", len(b), sum[:6])
	}
	for _, n := range notes {
		v += " (note: " + string(n) + ")"
	}
	return v
}

// question writes the proxy's own question for a call of tool on upstream
// with args: the operator's template line, if any, then one line naming the
// upstream and the tool, then every argument as key and value. Nothing in it
// comes from the upstream: names and values come from the call (the model)
// and the operator, and every one of them goes through package prompt.
func question(upstream, tool string, args []argument, t template) string {
	var b strings.Builder
	if t != nil {
		for _, part := range t {
			if !part.arg {
				b.WriteString(part.text)
				continue
			}
			i := indexArg(args, part.text)
			if i < 0 {
				b.WriteString("(no " + part.text + ")")
				continue
			}
			b.WriteString(args[i].show(valueWidth))
		}
		b.WriteString("\n")
	}
	b.WriteString("Run the tool " + showValue(tool, nameWidth) + " of " + showValue(upstream, nameWidth))
	switch len(args) {
	case 0:
		b.WriteString(" with no arguments?")
	case 1:
		b.WriteString(" with exactly this argument?")
	default:
		b.WriteString(" with exactly these " + strconv.Itoa(len(args)) + " arguments?")
	}
	for _, a := range args {
		// The type before the value: false and «false» differ at sight,
		// and the type is never cut.
		b.WriteString("\n- " + showValue(a.key, keyWidth) + ": ")
		if k := a.kind(); k == "null" {
			b.WriteString("null")
		} else {
			b.WriteString(k + " " + a.show(valueWidth))
		}
	}
	return b.String()
}

func indexArg(args []argument, key string) int {
	for i, a := range args {
		if a.key == key {
			return i
		}
	}
	return -1
}
