// Package redact keeps passwords out of the errors the shared stores return
// about the connection URL they were given, since errors end up in logs.
//
// It finds what may be a password, and removes it; it does not parse
// connection strings for any other purpose, and it cannot know a password
// that appears in a form it does not look for.
package redact

import (
	"net/url"
	"strings"
)

// URLPasswords returns what may be the password in rawURL: the parsed one,
// or for a URL that does not parse, the text between the first ':' of the
// user info and the first or the last '@'.
func URLPasswords(rawURL string) []string {
	if u, err := url.Parse(rawURL); err == nil {
		if pw, ok := u.User.Password(); ok {
			return []string{pw}
		}
		return nil
	}
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil
	}
	var pws []string
	for _, at := range []int{strings.Index(rest, "@"), strings.LastIndex(rest, "@")} {
		if at < 0 {
			continue
		}
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			pws = append(pws, pw)
		}
	}
	return pws
}

// Scrub replaces every occurrence in msg of each non-empty secret.
func Scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
