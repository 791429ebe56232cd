package approve

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// TestLink: a link names its id, is 43 characters of base64url, does not
// hold the id, and is refused once any character changes, under another
// key, or in another spelling.
func TestLink(t *testing.T) {
	secret := make([]byte, 32)
	rand.Read(secret)
	k, err := deriveKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	secret[0] ^= 1
	other, _ := deriveKeys(secret)
	for range 100 {
		var id ledger.ID
		rand.Read(id[:])
		link := k.makeLink(id)
		if len(link) != linkLen || linkLen != 43 {
			t.Fatalf("link %q: %d characters, want %d = 43", link, len(link), linkLen)
		}
		if got, ok := k.parseLink(link); !ok || got != id {
			t.Fatalf("parseLink(makeLink(%s)) = %s, %v", id, got, ok)
		}
		if k.makeLink(id) != link {
			t.Fatal("the same id got another link")
		}
		if b, _ := b64.DecodeString(link); slices.Equal(b[:16], id[:]) {
			t.Fatal("the link holds the id")
		}
		if _, ok := other.parseLink(link); ok {
			t.Fatal("a link was accepted under another key")
		}
		for i := range link {
			for _, c := range []byte{'A', 'f', '-', '_', '0'} {
				if c == link[i] {
					continue
				}
				forged := link[:i] + string(c) + link[i+1:]
				if _, ok := k.parseLink(forged); ok {
					t.Fatalf("forged link %q (from %q) accepted", forged, link)
				}
			}
		}
		for _, bad := range []string{"", link[1:], link + "A", link + "=", "callback"} {
			if _, ok := k.parseLink(bad); ok {
				t.Fatalf("parseLink(%q) accepted", bad)
			}
		}
	}
	if _, err := deriveKeys(make([]byte, MinKeyLen-1)); err == nil {
		t.Error("a key shorter than MinKeyLen was accepted")
	}
}

// TestSegments: each isolate becomes a <bdi> of its direction holding what
// it held; bidi controls that prompt never writes raw show as escapes.
func TestSegments(t *testing.T) {
	text := func(s string) segment { return segment{Text: s} }
	iso := func(dir string, c ...segment) segment { return segment{Isolate: true, Dir: dir, Children: c} }
	for _, c := range []struct {
		in   string
		want []segment
	}{
		{"plain", []segment{text("plain")}},
		{"Delete «\u2068a.txt\u2069»?", []segment{text("Delete «"), iso("", text("a.txt")), text("»?")}},
		{"«\u2068\u2066/\u2068srv\u2069/\u2068x\u2069\u2069\u2069»", []segment{text("«"), iso("", iso("ltr", text("/"), iso("", text("srv")), text("/"), iso("", text("x")))), text("»")}},
		{"\u2067rtl\u2069", []segment{iso("rtl", text("rtl"))}},
		{"a\u2069b", []segment{text(`a\u{2069}b`)}},
		{"a\u202Eb\u200Fc\u061C", []segment{text(`a\u{202E}b\u{200F}c\u{61C}`)}},
		{"\u2068open", []segment{iso("", text("open"))}},
		{"", nil},
	} {
		if got := segments(c.in); !equalSegments(got, c.want) {
			t.Errorf("segments(%+q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func equalSegments(a, b []segment) bool {
	return slices.EqualFunc(a, b, func(x, y segment) bool {
		return x.Text == y.Text && x.Isolate == y.Isolate && x.Dir == y.Dir && equalSegments(x.Children, y.Children)
	})
}

// TestPublicURL: https anywhere, http only on loopback; the origin is as
// browsers send it; the page's path follows the base's.
func TestPublicURL(t *testing.T) {
	for _, c := range []struct{ in, base, origin string }{
		{"https://Confirm.Example.com", "https://confirm.example.com", "https://confirm.example.com"},
		{"https://confirm.example.com:443/", "https://confirm.example.com", "https://confirm.example.com"},
		{"https://confirm.example.com:8443/tools/", "https://confirm.example.com:8443/tools", "https://confirm.example.com:8443"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080", "http://[::1]:8080", "http://[::1]:8080"},
		{"http://localhost", "http://localhost", "http://localhost"},
		{"http://confirm.example.com", "", ""},
		{"http://10.0.0.1:8080", "", ""},
		{"ftp://confirm.example.com", "", ""},
		{"https://user@confirm.example.com", "", ""},
		{"https://confirm.example.com/?q=1", "", ""},
		{"https://confirm.example.com/#x", "", ""},
		{"confirm.example.com", "", ""},
	} {
		base, origin, secure, err := checkPublicURL(c.in)
		if c.base == "" {
			if err == nil {
				t.Errorf("checkPublicURL(%q) accepted", c.in)
			}
			continue
		}
		if err != nil || base != c.base || origin != c.origin || secure != (c.in[:5] == "https") {
			t.Errorf("checkPublicURL(%q) = %q, %q, %v, %v; want %q, %q", c.in, base, origin, secure, err, c.base, c.origin)
		}
	}
}

// TestPasskeysNamingNoHolderRefused: a passkeys file holding a passkey
// that says neither whose calls are its holder's nor that they make none
// (a line written before holders were named, or by hand) is refused when
// the page starts, naming the passkey: its holder could approve their own
// calls. The same line with a principal, or as not a caller, starts (the
// controls).
func TestPasskeysNamingNoHolderRefused(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{`{"name":"mallory","handle":"AA==","enrolment":"AA==","credential":{}}`, `passkey "mallory" names no holder`},
		{`{"name":"mallory","principal":"mallory","notCaller":true,"handle":"AA==","enrolment":"AA==","credential":{}}`, `passkey "mallory" names no holder`},
		{`{"name":"mallory","principal":"mallory","handle":"AA==","enrolment":"AA==","credential":{}}`, ""},
		{`{"name":"mallory","notCaller":true,"handle":"AA==","enrolment":"AA==","credential":{}}`, ""},
	} {
		file := filepath.Join(t.TempDir(), "passkeys")
		if err := os.WriteFile(file, []byte(tc.line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := newPasskeys(&Passkeys{File: file}, "http://localhost:1", "localhost")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("control %s: %v", tc.line, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.line, err, tc.want)
		}
	}
}
