package requeststate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/internal/jsonstring"
)

// ErrArguments: request arguments are not acceptable JSON (see
// [ArgumentsDigest]). Check it with errors.Is.
var ErrArguments = errors.New("requeststate: unacceptable arguments")

// A DuplicateKeyError reports an object key that arguments give twice
// ([CanonicalArguments]). It wraps [ErrArguments].
type DuplicateKeyError struct {
	// Key is the key, decoded: escapes resolved, bytes that are not UTF-8
	// kept as they are, and a lone UTF-16 surrogate escape as the three
	// bytes UTF-8 would give it (no valid UTF-8 holds them). It is
	// untrusted text: show it escaped (package prompt).
	Key string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("%v: duplicate object key %q", ErrArguments, e.Key)
}

func (e *DuplicateKeyError) Unwrap() error { return ErrArguments }

// MaxDepth is the deepest nesting of objects and arrays [ArgumentsDigest]
// accepts.
const MaxDepth = 128

// ArgumentsDigest returns the hex SHA-256 of [CanonicalArguments](raw).
func ArgumentsDigest(raw json.RawMessage) (string, error) {
	c, err := CanonicalArguments(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalArguments returns one canonical byte form of the JSON value raw,
// such that two inputs have the same form exactly when they mean the same
// arguments:
//
//   - absent (empty raw), null and {} all become {};
//   - insignificant whitespace is dropped;
//   - object members are sorted by their canonical key bytes;
//   - numbers keep their literal text (1, 1.0 and 1e0 differ; nothing goes
//     through float64, so 10000000000000000000001 and 1e22 differ);
//   - strings compare by what they decode to: "\u0061" equals "a" and a
//     surrogate pair equals the raw character, but a lone surrogate escape
//     and an invalid UTF-8 byte each stay themselves (encoding/json turns
//     both into U+FFFD, which would make different arguments share a digest).
//     Canonical strings escape only '"', '\\', control characters (short
//     forms \b \t \n \f \r, else \u00xx) and lone surrogates (\udxxx);
//     invalid bytes are copied raw.
//
// It refuses, wrapping [ErrArguments]: invalid JSON, trailing data, nesting
// deeper than [MaxDepth], and duplicate object keys (by decoded value), since
// parsers disagree on which duplicate wins and the handler could then act on
// arguments other than those the digest covers. The canonical form of a
// canonical form is itself.
func CanonicalArguments(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("{}"), nil
	}
	p := parser{in: raw}
	out, err := p.value(nil, 0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.in) {
		return nil, p.errorf("trailing data")
	}
	if string(out) == "null" {
		return []byte("{}"), nil
	}
	return out, nil
}

type parser struct {
	in  []byte
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrArguments, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the next value to out.
func (p *parser) value(out []byte, depth int) ([]byte, error) {
	p.space()
	if p.pos == len(p.in) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		return p.str(out)
	case c == '-' || '0' <= c && c <= '9':
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return nil, p.errorf("unexpected byte 0x%02x", c)
	}
}

func (p *parser) literal(out []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return nil, p.errorf("invalid literal")
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

type member struct{ key, val []byte }

func (p *parser) object(out []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // '{'
	var members []member
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, "{}"...), nil
	}
	for {
		p.space()
		if p.pos == len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errorf("expected object key")
		}
		key, err := p.str(nil)
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos == len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		val, err := p.value(nil, depth)
		if err != nil {
			return nil, err
		}
		members = append(members, member{key, val})
		p.space()
		if p.pos == len(p.in) {
			return nil, p.errorf("unterminated object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return nil, p.errorf("expected ',' or '}'")
		}
		p.pos++
	}
	slices.SortFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		// Duplicate keys: parsers disagree on which one wins (first, last,
		// error), so the handler might act on a value the digest never saw.
		if i > 0 && bytes.Equal(members[i-1].key, m.key) {
			return nil, &DuplicateKeyError{Key: decodeCanonical(m.key)}
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.key...)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), nil
}

func (p *parser) array(out []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // '['
	out = append(out, '[')
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			out = append(out, ',')
		}
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.space()
		if p.pos == len(p.in) {
			return nil, p.errorf("unterminated array")
		}
		if p.in[p.pos] == ']' {
			p.pos++
			return append(out, ']'), nil
		}
		if p.in[p.pos] != ',' {
			return nil, p.errorf("expected ',' or ']'")
		}
		p.pos++
	}
}

// number copies a number's literal text after checking the RFC 8259 grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.errorf("invalid number fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.errorf("invalid number exponent")
		}
	}
	return append(out, p.in[start:p.pos]...), nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.in) && '0' <= p.in[p.pos] && p.in[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// str appends the canonical form of the string at p.pos (see
// CanonicalArguments).
func (p *parser) str(out []byte) ([]byte, error) {
	p.pos++ // opening quote
	out = append(out, '"')
	for {
		if p.pos == len(p.in) {
			return nil, p.errorf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return append(out, '"'), nil
		case c == '\\':
			var err error
			if out, err = p.escape(out); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, p.errorf("control character in string")
		default:
			// Every other byte is its own canonical form: printable ASCII,
			// the bytes of a code point, and each invalid byte, kept raw
			// (distinct from U+FFFD and from any other invalid byte). Copied
			// in one run.
			start := p.pos
			for p.pos < len(p.in) {
				if c := p.in[p.pos]; c == '"' || c == '\\' || c < 0x20 {
					break
				}
				p.pos++
			}
			out = append(out, p.in[start:p.pos]...)
		}
	}
}

// escape decodes one escape sequence at p.pos (the backslash) and appends its
// canonical form.
func (p *parser) escape(out []byte) ([]byte, error) {
	r, n, err := jsonstring.Decode(p.in[p.pos:])
	switch {
	case errors.Is(err, jsonstring.ErrUnterminated):
		return nil, p.errorf("unterminated escape")
	case errors.Is(err, jsonstring.ErrHex):
		return nil, p.errorf("invalid \\u escape")
	case err != nil:
		return nil, p.errorf("invalid escape")
	}
	p.pos += n
	if utf16.IsSurrogate(r) {
		// A lone surrogate stays a distinct escape; it is not U+FFFD.
		return fmt.Appendf(out, `\u%04x`, r), nil
	}
	return appendRune(out, r), nil
}

// appendRune appends the canonical spelling of a valid code point.
func appendRune(out []byte, r rune) []byte {
	switch r {
	case '"':
		return append(out, `\"`...)
	case '\\':
		return append(out, `\\`...)
	case '\b':
		return append(out, `\b`...)
	case '\t':
		return append(out, `\t`...)
	case '\n':
		return append(out, `\n`...)
	case '\f':
		return append(out, `\f`...)
	case '\r':
		return append(out, `\r`...)
	}
	if r < 0x20 {
		return fmt.Appendf(out, `\u%04x`, r)
	}
	return utf8.AppendRune(out, r)
}

// decodeCanonical returns the text of a canonical JSON string (quotes
// included), as [DuplicateKeyError.Key] describes it. Canonical strings
// escape only '"', '\\', control characters and lone surrogates.
func decodeCanonical(q []byte) string {
	q = q[1 : len(q)-1]
	out := make([]byte, 0, len(q))
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' {
			out = append(out, q[i])
			continue
		}
		i++
		switch q[i] {
		case 'b':
			out = append(out, '\b')
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'f':
			out = append(out, '\f')
		case 'r':
			out = append(out, '\r')
		case 'u':
			u, _ := jsonstring.Hex4(q[i+1:])
			i += 4
			if utf16.IsSurrogate(u) {
				// The three bytes of a surrogate's UTF-8 form (WTF-8),
				// which utf8.AppendRune would turn into U+FFFD.
				out = append(out, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			} else {
				out = utf8.AppendRune(out, u)
			}
		default: // '"' and '\\'
			out = append(out, q[i])
		}
	}
	return string(out)
}
