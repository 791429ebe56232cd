package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

// TestApproversAdd: `mcp-confirm approvers add` prints a link that the
// approval page of a server with the same key file and public URL takes
// as an enrolment of NAME's passkey, for the principal --principal names
// (or none, --not-a-caller), and a page with another key does not (the
// control); bad input -- among it, neither or both of --principal and
// --not-a-caller -- is refused with usage and prints no link.
func TestApproversAdd(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := keyfile.Create(keys); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com/mcp", "--ttl", "1h", "--principal", "alice@example.com", "alice"}, nil, &out, &errOut)
	link := strings.TrimSpace(out.String())
	if code != 0 || !strings.HasPrefix(link, "https://mcp.example.com/approve/enrol/") {
		t.Fatalf("exit %d, printed %q; stderr %s", code, link, errOut.String())
	}
	k, err := keyfile.Read(keys)
	if err != nil {
		t.Fatal(err)
	}
	page := func(key []byte) (int, string) {
		l, err := ledger.New(ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := approve.New(context.Background(), approve.Options{Ledger: l, PublicURL: "https://mcp.example.com", Key: key,
			Passkeys: &approve.Passkeys{File: filepath.Join(dir, "passkeys")}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, link, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := page(k[0]); code != http.StatusOK || !strings.Contains(body, "as passkey:alice.") || !strings.Contains(body, "you are sub:alice@example.com,") {
		t.Errorf("the page takes the link with %d: %s", code, body)
	}
	if code, _ := page(bytes.Repeat([]byte{7}, 32)); code != http.StatusNotFound {
		t.Errorf("control: a page with another key answered %d", code)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com", "--not-a-caller", "bob"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("--not-a-caller: exit %d: %s", code, errOut.String())
	}
	link = strings.TrimSpace(out.String())
	if code, body := page(k[0]); code != http.StatusOK || !strings.Contains(body, "as passkey:bob.") || strings.Contains(body, "you are") {
		t.Errorf("--not-a-caller: the page takes the link with %d: %s", code, body)
	}
	pk := []string{"--principal", "alice"}
	for _, args := range [][]string{
		{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com", "alice"},
		{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com", "--principal", "alice", "--not-a-caller", "alice"},
		{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com", "--principal", "", "alice"},
		{"approvers"},
		{"approvers", "remove", "alice"},
		{"approvers", "add", "--key-file", keys, "alice"},
		append([]string{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com"}, append(pk, "alice", "bob")...),
		append([]string{"approvers", "add", "--key-file", keys, "--public-url", "https://mcp.example.com"}, append(pk, "")...),
		append([]string{"approvers", "add", "--key-file", keys, "--public-url", "http://mcp.example.com"}, append(pk, "alice")...),
		append([]string{"approvers", "add", "--key-file", filepath.Join(dir, "none"), "--public-url", "https://mcp.example.com"}, append(pk, "alice")...),
	} {
		out.Reset()
		errOut.Reset()
		if code := run(context.Background(), args, nil, &out, &errOut); code == 0 || out.Len() != 0 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}
