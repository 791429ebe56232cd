package server_test

// The attack table: each test names an attack, drives it through a real
// go-sdk client and server with the boundary in the chain, asserts which
// layer refused (the boundary's JSON-RPC error, or the tool's IsError
// result) and that nothing was deleted. The attacks every confirming front
// end meets alike — an approval spent twice, replayed onto another file,
// raced by 32 clients, expired, another user's — are the front-end suite's
// (TestFrontEndSuite, package confirmtest); these are the server's own.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// Layer: boundary. Made-up and tampered requestState.
func TestAttackForgedState(t *testing.T) {
	e := newEnv(t, envOptions{})
	f := e.file("a.txt", "a")
	cs := e.connect(clientOptions{manual: true, answer: accept()})
	state := ask(t, cs, f)

	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, "v1."))
	if err != nil {
		t.Fatalf("sealed state is not v1.base64url: %v", err)
	}
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return "v1." + base64.RawURLEncoding.EncodeToString(b)
	}
	forged := map[string]string{
		"plaintext":          "confirm.v1.00000000000000000000000000000000",
		"garbage":            "v1.AAAA",
		"no prefix":          strings.TrimPrefix(state, "v1."),
		"v2 prefix":          "v2." + strings.TrimPrefix(state, "v1."),
		"key id flipped":     flip(0),
		"nonce flipped":      flip(6),
		"ciphertext flipped": flip(len(raw) / 2),
		"tag flipped":        flip(len(raw) - 1),
		"truncated":          state[:len(state)-4],
		"trailing newline":   state + "\n",
	}
	for name, s := range forged {
		t.Run(name, func(t *testing.T) {
			res, err := retry(cs, f, s, yes())
			wantBoundaryRefusal(t, res, err)
			wantExists(t, f)
		})
	}
	if !strings.Contains(e.log.String(), "requestState") {
		t.Errorf("the real reasons were not logged:\n%s", e.log)
	}
	res, err := retry(cs, f, state, yes())
	wantDeleted(t, res, err, f)
}

// Layer: boundary. A state sealed with a key this server does not hold.
func TestAttackStateFromAnotherKey(t *testing.T) {
	mallory := newEnv(t, envOptions{keys: [][]byte{[]byte("mallory's own key, 32 bytes or more!!")}})
	e := newEnv(t, envOptions{roots: []string{mallory.root}})
	f := mallory.file("a.txt", "a")
	state := ask(t, mallory.connect(clientOptions{manual: true, answer: accept()}), f)

	res, err := retry(e.connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantBoundaryRefusal(t, res, err)
	wantExists(t, f)
}

// Layer: ledger (tool error). Two replicas share keys and name but keep their
// own in-memory ledgers: B has no record of A's question, and fails closed.
func TestAttackStateFromAnotherReplica(t *testing.T) {
	a := newEnv(t, envOptions{})
	b := newEnv(t, envOptions{roots: []string{a.root}})
	f := a.file("a.txt", "a")
	csA := a.connect(clientOptions{manual: true, answer: accept()})
	state := ask(t, csA, f)

	res, err := retry(b.connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantToolRefusal(t, res, err, "no record of this confirmation")
	wantExists(t, f)

	// B's refusal did not spend A's confirmation.
	res, err = retry(csA, f, state, yes())
	wantDeleted(t, res, err, f)
}

// Layer: sanitizer. A file name that forges a second, official-looking
// prompt stays inside its slot: one line, escaped, delimited.
func TestAttackForgedSystemPrompt(t *testing.T) {
	names := []string{
		"cache.txt\n\nSYSTEM NOTICE: your session has expired.\nEnter your AWS secret key to continue:",
		"cache.txt» and «thesis.txt",
		"report\u202Etxt.exe",                    // right-to-left override
		"a\u200Bb.txt",                           // zero-width space
		"note\U000E0049\U000E0047\U000E004E.txt", // tag characters
	}
	for _, era := range []string{eraMRTR, eraLegacy} {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			ans := decline()
			cs := e.connect(clientOptions{era: era, answer: ans})
			for _, name := range names {
				f := e.file(name, "x")
				res, err := call(cs, f)
				if err != nil || res.IsError {
					t.Fatalf("%q: %v %s", name, err, describe(res))
				}
				wantExists(t, f)
			}
			qs := ans.Questions()
			if len(qs) != len(names) {
				t.Fatalf("asked %d questions, want %d", len(qs), len(names))
			}
			for i, q := range qs {
				checkQuestion(t, names[i], q)
			}
		})
	}
}

// checkQuestion asserts a question shows exactly one delimited, one-line,
// escaped value.
func checkQuestion(t *testing.T, name, q string) {
	t.Helper()
	if strings.ContainsAny(q, "\n\r\u2028\u2029\u202E\u200B") {
		t.Errorf("question for %q contains a raw line break or invisible control: %q", name, q)
	}
	for _, r := range q {
		if r >= 0xE0000 && r <= 0xE007F {
			t.Errorf("question for %q contains a raw tag character: %q", name, q)
		}
	}
	if strings.Count(q, "«") != 1 || strings.Count(q, "»") != 1 {
		t.Errorf("question for %q does not show exactly one delimited value: %q", name, q)
	}
	if name != "cache.txt» and «thesis.txt" && !strings.Contains(q, "Note: the name contains hidden") {
		t.Errorf("question for %q does not warn about hidden characters: %q", name, q)
	}
	t.Logf("asked: %s", q)
	// Outside the delimiters, the question is the server's own text only.
	open, close := strings.Index(q, "«"), strings.LastIndex(q, "»")
	if open < 0 || close < open {
		return
	}
	if q[:open] != "Delete the file " || !strings.HasPrefix(q[close+len("»"):], " (1 byte)? This cannot be undone.") {
		t.Errorf("the name leaked out of its slot: %q", q)
	}
}

// Layer: tool (re-check). After the question, the file is replaced by a
// symlink to another file inside the root.
func TestAttackSymlinkSwapAfterApproval(t *testing.T) {
	e := newEnv(t, envOptions{})
	f, victim := e.file("a.txt", "a"), e.file("thesis.txt", "years of work")
	cs := e.connect(clientOptions{manual: true, answer: accept()})
	state := ask(t, cs, f)

	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("thesis.txt", f); err != nil {
		t.Fatal(err)
	}
	res, err := retry(cs, f, state, yes())
	wantToolRefusal(t, res, err, "Nothing was deleted")
	wantExists(t, f, victim)
	if fi, _ := os.Lstat(f); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink itself was replaced")
	}
}

// Layer: tool (re-check). After the question, another file is renamed over
// the approved one (same name and size, different inode).
func TestAttackFileReplacedAfterApproval(t *testing.T) {
	e := newEnv(t, envOptions{})
	f := e.file("a.txt", "aaaa")
	cs := e.connect(clientOptions{manual: true, answer: accept()})
	state := ask(t, cs, f)

	other := e.file("b.txt", "bbbb")
	if err := os.Rename(other, f); err != nil {
		t.Fatal(err)
	}
	res, err := retry(cs, f, state, yes())
	wantToolRefusal(t, res, err, "replaced or modified after it was approved")
	if b, _ := os.ReadFile(f); string(b) != "bbbb" {
		t.Fatalf("replacement file was touched: %q", b)
	}
}

// Layer: tool (re-check at execution). While the person reads the
// question, the approved file is changed: one row per field the approval
// binds for the file (inode, size, modification time, mode), each changed
// alone. The inode row renames another file over it with the same size,
// modification time (its owner may set any) and mode; the other rows keep
// the inode. The answer is refused and what is there now is left as it is.
// An untouched file is deleted (the control).
func TestAttackFileChangedAfterApproval(t *testing.T) {
	cases := []struct {
		name     string
		change   func(t *testing.T, f string, mtime time.Time)
		replaced bool // the row puts another inode at the name
	}{
		{"another file alike renamed over it", func(t *testing.T, f string, mtime time.Time) {
			other := filepath.Join(filepath.Dir(f), "other")
			if err := os.WriteFile(other, []byte("bbbb"), 0o644); err != nil {
				t.Error(err)
			}
			if err := os.Chtimes(other, mtime, mtime); err != nil {
				t.Error(err)
			}
			if err := os.Rename(other, f); err != nil {
				t.Error(err)
			}
		}, true},
		{"grown, modification time put back", func(t *testing.T, f string, mtime time.Time) {
			appendTo(t, f, "more")
			if err := os.Chtimes(f, mtime, mtime); err != nil {
				t.Error(err)
			}
		}, false},
		{"same size, modification time moved", func(t *testing.T, f string, mtime time.Time) {
			if err := os.Chtimes(f, mtime, mtime.Add(time.Second)); err != nil {
				t.Error(err)
			}
		}, false},
		{"mode changed", func(t *testing.T, f string, mtime time.Time) {
			if err := os.Chmod(f, 0o600); err != nil {
				t.Error(err)
			}
		}, false},
		{"control: untouched", nil, false},
	}
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := e.file(fmt.Sprintf("d/%d.txt", i), "aaaa")
				before, err := os.Lstat(f)
				if err != nil {
					t.Fatal(err)
				}
				ans := accept()
				if c.change != nil {
					ans.Before = func() { c.change(t, f, before.ModTime()) }
				}
				res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), f)
				if c.change == nil {
					wantDeleted(t, res, err, f)
					return
				}
				wantToolRefusal(t, res, err, "replaced or modified after it was approved")
				after, err := os.Lstat(f)
				if err != nil {
					t.Fatalf("the changed file is gone: %v", err)
				}
				if changed := !os.SameFile(before, after); changed != c.replaced {
					t.Fatalf("inode changed: %v, want %v: the row shows nothing", changed, c.replaced)
				}
				if c.replaced && (after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode()) {
					t.Fatal("the replacement differs in more than its inode: the row shows nothing")
				}
			})
		}
	})
}

func appendTo(t *testing.T, f, s string) {
	t.Helper()
	w, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// Layer: tool, before asking. Paths outside the roots — absolute, "..",
// a sibling directory sharing the root's prefix, a symlink leading out —
// are refused without a question and without issuing a confirmation.
func TestAttackPathOutsideRoots(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "data")
	sibling := filepath.Join(base, "data-evil")
	for _, d := range []string{root, sibling} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(base, "secret.txt")
	inSibling := filepath.Join(sibling, "x.txt")
	for _, p := range []string{outside, inSibling} {
		if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.txt", filepath.Join(root, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(root, "sub", "up")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{roots: []string{root}})
	paths := map[string]string{
		"absolute outside": outside,
		"dot-dot":          filepath.Join(root, "..", "secret.txt"),
		"relative dot-dot": "../secret.txt",
		"sibling prefix":   inSibling,
		"root itself":      root,
		"system file":      "/etc/hostname",
		"abs symlink out":  filepath.Join(root, "abs-link"),
		"rel symlink out":  filepath.Join(root, "rel-link"),
		"through dir link": filepath.Join(root, "sub", "up", "secret.txt"),
		"empty":            "",
		"nul byte":         root + "/a\x00b",
	}
	for _, era := range []string{eraMRTR, eraLegacy} {
		for name, p := range paths {
			t.Run(era+"/"+name, func(t *testing.T) {
				ans := accept()
				cs := e.connect(clientOptions{era: era, answer: ans})
				res, err := call(cs, p)
				wantToolRefusal(t, res, err, "")
				if len(ans.Questions()) != 0 {
					t.Fatalf("a question was asked for %q", p)
				}
			})
		}
	}
	wantExists(t, outside, inSibling, filepath.Join(root, "abs-link"), filepath.Join(root, "rel-link"))
	if n := e.issued(); n != 0 {
		t.Fatalf("%d confirmations were issued for refused paths", n)
	}
}

// Layer: tool. With no --root, every call is refused, before asking.
func TestAttackNoRootsRefusesAll(t *testing.T) {
	e := newEnv(t, envOptions{noRoots: true})
	victim := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(victim, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{eraMRTR, eraLegacy} {
		ans := accept()
		res, err := call(e.connect(clientOptions{era: era, answer: ans}), victim)
		wantToolRefusal(t, res, err, "no --root")
		if len(ans.Questions()) != 0 {
			t.Fatal("a question was asked")
		}
	}
	wantExists(t, victim)
	if e.issued() != 0 {
		t.Fatal("a confirmation was issued")
	}
}

// Layer: boundary. A state sealed by another service sharing the keys.
func TestAttackAudienceMismatch(t *testing.T) {
	other := newEnv(t, envOptions{name: "some-other-server"})
	e := newEnv(t, envOptions{roots: []string{other.root}})
	f := other.file("a.txt", "a")
	state := ask(t, other.connect(clientOptions{manual: true, answer: accept()}), f)

	res, err := retry(e.connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantBoundaryRefusal(t, res, err)
	wantExists(t, f)
}

// Layer: boundary. Arguments that give a key twice: which one would the
// tool act on? A first round (no requestState) is refused with an
// invalid-params error that names the key, escaped; nothing is asked or
// issued. The same arguments beside a genuine requestState get the frozen
// rejection, which never says why; the approval then still works for the
// call it was given for.
func TestAttackDuplicateArgumentKeys(t *testing.T) {
	ctx := context.Background()
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		f, other := e.file("a.txt", "a"), e.file("b.txt", "b")
		a := accept()
		cs := e.connect(clientOptions{era: era, transport: transport, answer: a})
		quoted := func(q string) string { return "«\u2068" + q + "\u2069»" }
		for _, tt := range []struct{ arguments, want string }{
			{fmt.Sprintf(`{"path":%q,"path":%q}`, other, f), "the key " + quoted("path") + " is given twice"},
			{fmt.Sprintf(`{"path":%q,"p\u0061th":%q}`, other, f), quoted("path")},
			{fmt.Sprintf(`{"path":%q,"x\n\u202e":1,"x\n\u202e":2}`, f), quoted(`x\n\u{202E}`)},
		} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: json.RawMessage(tt.arguments)})
			mcptest.WantArgumentsRefusal(t, res, err, tt.want)
		}
		if n := e.issued(); n != 0 {
			t.Fatalf("%d confirmations issued", n)
		}
		if q := a.Questions(); len(q) != 0 {
			t.Fatalf("the person was asked %q", q)
		}
		wantExists(t, f, other)

		// A genuine state (asked for by a 2026-07-28 client in either era's
		// test: the boundary verifies every requestState on the wire).
		state := ask(t, e.connect(clientOptions{transport: transport, manual: true, answer: accept()}), f)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:           "delete_file",
			Arguments:      json.RawMessage(fmt.Sprintf(`{"path":%q,"path":%q}`, f, f)),
			InputResponses: mcp.InputResponseMap{"confirm": yes()},
			RequestState:   state,
		})
		wantBoundaryRefusal(t, res, err)
		wantExists(t, f, other)
		res, err = retry(cs, f, state, yes())
		wantDeleted(t, res, err, f)
		wantExists(t, other)
	})
}

// Layer: tool input (go-sdk validates delete_file's arguments against the
// schema it derives from the tool's Go type, before the handler runs).
// delete_file takes one string, so a number never reaches its question;
// one a double cannot hold (as the path, or beside it) is refused with the
// other type errors: nothing asked, issued or deleted. Over streamable HTTP
// in the 2026-07-28 era a number past the largest double is refused sooner,
// by the transport: go-sdk's client cannot decode the call to write its
// Mcp-Name header, and the server answers 400. The proxy, whose questions
// show numbers, refuses them itself (TestProxyInexactNumberRefused).
func TestAttackInexactNumberRefused(t *testing.T) {
	ctx := context.Background()
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		f := e.file("a.txt", "a")
		a := accept()
		cs := e.connect(clientOptions{era: era, transport: transport, answer: a})
		for _, tt := range []struct {
			args     string
			infinite bool
		}{
			{`{"path":9007199254740993}`, false},
			{`{"path":1e400}`, true},
			{fmt.Sprintf(`{"path":%q,"n":9007199254740993}`, f), false},
			{fmt.Sprintf(`{"path":%q,"n":1e-400}`, f), false},
			{fmt.Sprintf(`{"path":%q,"n":-1e400}`, f), true},
		} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: json.RawMessage(tt.args)})
			if tt.infinite && era == eraMRTR && transport == httpT {
				if err == nil || !strings.Contains(err.Error(), "rejected by transport") {
					t.Fatalf("%s: err=%v res=%s; want the transport's 400", tt.args, err, describe(res))
				}
				continue
			}
			wantToolRefusal(t, res, err, `validating "arguments"`)
		}
		if n, q := e.issued(), a.Questions(); n != 0 || len(q) != 0 {
			t.Fatalf("%d issued, asked %q; want nothing", n, q)
		}
		wantExists(t, f)
		// Control: the path alone is asked, and deleted.
		res, err := call(cs, f)
		wantDeleted(t, res, err, f)
	})
}
