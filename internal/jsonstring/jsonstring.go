// Package jsonstring reads the escapes of JSON strings (RFC 8259, section
// 7): the one decoder the module's JSON readers share — the boundary's
// canonical form (impl/requeststate), the question's JSON (impl/prompt)
// and the proxy's split of a call's arguments (impl/proxy).
//
// [Decode] reads one escape and leaves lone UTF-16 surrogates to its
// caller, since each reader treats them its own way: the canonical form
// keeps them as distinct escapes, the question refuses them, and
// encoding/json reads them as U+FFFD. [Unquote] reads a whole string
// literal as encoding/json does, U+FFFD included (FuzzUnquote compares
// the two).
//
// It does not validate JSON beyond one string, and it never normalizes:
// two spellings of a string decode alike only if encoding/json reads
// them alike.
package jsonstring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// The ways an escape can be malformed. Each reader words its own error.
var (
	// ErrUnterminated: the input ends inside the escape's first two bytes.
	ErrUnterminated = errors.New("jsonstring: an escape never ends")
	// ErrInvalid: the backslash is followed by none of " \ / b f n r t u.
	ErrInvalid = errors.New("jsonstring: an invalid escape")
	// ErrHex: \u is not followed by four hex digits.
	ErrHex = errors.New(`jsonstring: an invalid \u escape`)
	// ErrString: Unquote's input is not one JSON string literal.
	ErrString = errors.New("jsonstring: not a JSON string")
)

// Decode reads the escape sequence at the start of b, whose first byte is
// a backslash, and returns the code point it stands for and its length in
// bytes. A \u escape of a high surrogate directly followed by a \u escape
// of a low surrogate is one code point (12 bytes). A lone surrogate is
// returned as its value (0xD800 to 0xDFFF, which is no code point UTF-8
// can encode) for the caller to judge; utf16.IsSurrogate tells it.
func Decode(b []byte) (r rune, n int, err error) {
	if len(b) < 2 {
		return 0, 0, ErrUnterminated
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
	default:
		return 0, 0, ErrInvalid
	}
	u, ok := Hex4(b[2:])
	if !ok {
		return 0, 0, ErrHex
	}
	if u >= 0xD800 && u < 0xDC00 && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if lo, ok := Hex4(b[8:]); ok && 0xDC00 <= lo && lo <= 0xDFFF {
			return utf16.DecodeRune(u, lo), 12, nil
		}
	}
	return u, 6, nil
}

// Hex4 reads four hex digits (either case) at the start of b.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Unquote returns what encoding/json's Unmarshal reads into a Go string
// from q, one JSON string literal with its quotes and nothing around it:
// each byte that is not UTF-8 and each lone surrogate read as U+FFFD. It
// fails with ErrString, or an escape's error, where Unmarshal fails.
func Unquote(q []byte) (string, error) { return unquote(q, false) }

// UnquoteUTF8 is Unquote for q that the caller has checked is valid UTF-8,
// as a parser that refuses other bytes leaves it: it skips that check,
// which is most of the cost of a long string outside ASCII. On bytes that
// are not UTF-8 it may return them raw, where Unquote returns U+FFFD.
func UnquoteUTF8(q []byte) (string, error) { return unquote(q, true) }

// unquote is Unquote, trusting q to be UTF-8 if valid.
func unquote(q []byte, valid bool) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", ErrString
	}
	body := q[1 : len(q)-1]
	if plain(body) && (valid || utf8.Valid(body)) {
		return string(body), nil // the usual case: one copy
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		switch c := body[i]; {
		case c == '\\':
			r, n, err := Decode(body[i:])
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			i += n
		case c < 0x20 || c == '"':
			return "", ErrString
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(body[i:])
			out = utf8.AppendRune(out, r) // an invalid byte: U+FFFD
			i += n
		}
	}
	return string(out), nil
}

// plain reports whether body has no escape, quote or control character:
// a string literal's body that reads as itself if it is UTF-8.
func plain(body []byte) bool {
	if bytes.IndexByte(body, '\\') >= 0 || bytes.IndexByte(body, '"') >= 0 {
		return false
	}
	// Eight bytes at a time: w has a byte below 0x20 exactly when w minus
	// 0x20 in each byte sets the high bit of a byte whose high bit w has
	// clear.
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(body); i += 8 {
		w := binary.LittleEndian.Uint64(body[i:])
		if (w-ones*0x20)&^w&highs != 0 {
			return false
		}
	}
	for _, c := range body[i:] {
		if c < 0x20 {
			return false
		}
	}
	return true
}
