package redact

import (
	"slices"
	"testing"
)

func TestURLPasswords(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis://:s3cret@host:6379/0", []string{"s3cret"}},
		{"postgres://alice:pa%40ss@host/db", []string{"pa@ss"}},
		{"postgres://alice@host/db", nil},
		{"redis://host:6379", nil},
		{"no scheme at all", nil},
		// Does not parse (bad port, bad escape): guessed from the text.
		{"redis://:pw@host:port/0", []string{"pw", "pw"}}, // first and last @ alike
		{"postgres://u:p%zz@host/db", []string{"p%zz", "p%zz"}},
		{"postgres://u:a@b@host:x/db", []string{"a", "a@b"}},
	} {
		if got := URLPasswords(tc.url); !slices.Equal(got, tc.want) {
			t.Errorf("URLPasswords(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestScrub(t *testing.T) {
	for _, tc := range []struct {
		msg     string
		secrets []string
		want    string
	}{
		{"dial: pw pw", []string{"pw"}, "dial: xxxxx xxxxx"},
		{"dial: k1 k2", []string{"k1", "k2"}, "dial: xxxxx xxxxx"},
		{"dial: x", []string{""}, "dial: x"},
		{"dial: x", nil, "dial: x"},
	} {
		if got := Scrub(tc.msg, tc.secrets...); got != tc.want {
			t.Errorf("Scrub(%q, %q) = %q, want %q", tc.msg, tc.secrets, got, tc.want)
		}
	}
}
