package server_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// The happy path in every era over every transport: asked once, deleted
// once, its outcome recorded.
func TestDeleteConfirmed(t *testing.T) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		f := e.file("dir/report.pdf", "12345")
		keep := e.file("dir/keep.txt", "k")
		ans := accept()
		res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), f)
		wantDeleted(t, res, err, f)
		wantExists(t, keep)
		qs := ans.Questions()
		if len(qs) != 1 {
			t.Fatalf("asked %d times, want 1", len(qs))
		}
		if !strings.Contains(qs[0], "report.pdf") || !strings.Contains(qs[0], "5 bytes") {
			t.Fatalf("question %q does not show the path and size", qs[0])
		}
		if e.issued() != 1 {
			t.Fatalf("issued %d confirmations, want 1", e.issued())
		}
		// What the deletion did is recorded, for any retry to get back.
		wantEvents(t, e, map[event]int{
			{ledger.ActionRedeem, ledger.ResultOK, 0}:                    1,
			{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeDone}: 1,
		})
		// The ledger keeps no wording: the log is the record of what
		// was asked.
		if log := e.log.String(); !strings.Contains(log, "confirm: asked") || !strings.Contains(log, "report.pdf") {
			t.Fatalf("the log does not record the question:\n%s", log)
		}
	})
}

// A client whose dialog fails deletes nothing. On the older era go-sdk's
// shim asks in-process inside the call and ends it with an error, so the
// flow cancels the confirmation it issued: failing dialogs do not hold
// pending confirmations against the caps. On 2026-07-28 the question went
// back to the client in a completed call, and the client fails afterwards
// without telling the server: the confirmation waits for its TTL, as any
// unanswered question does.
func TestFailingDialog(t *testing.T) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		f := e.file("a.txt", "a")
		ans := &answerer{Fail: errors.New("the dialog could not be shown")}
		res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), f)
		if err == nil && !res.IsError {
			t.Fatalf("a failed dialog ended in success: %s", describe(res))
		}
		wantExists(t, f)
		if len(ans.Questions()) != 1 || e.issued() != 1 {
			t.Fatalf("asked %d times, issued %d confirmations; want 1 and 1", len(ans.Questions()), e.issued())
		}
		cancelled := e.count(ledger.ActionCancel, ledger.ResultOK)
		if want := map[string]int{eraLegacy: 1, eraMRTR: 0}[era]; cancelled != want {
			t.Fatalf("%d confirmations cancelled, want %d", cancelled, want)
		}
		if redeemed := e.count(ledger.ActionRedeem, ledger.ResultOK); redeemed != 0 {
			t.Fatalf("%d confirmations redeemed", redeemed)
		}
	})
}

// Key rotation: a server whose ring is [new, old] accepts states sealed
// with old; once old is retired, they are refused.
func TestKeyRotation(t *testing.T) {
	oldKey := []byte("the old key, at least thirty-two bytes long")
	newKey := []byte("the new key, at least thirty-two bytes long")
	before := newEnv(t, envOptions{keys: [][]byte{oldKey}})
	f := before.file("a.txt", "a")
	state := ask(t, before.connect(clientOptions{manual: true, answer: accept()}), f)

	// Both replicas share one ledger through the same store.
	retired := newEnv(t, envOptions{roots: []string{before.root}, keys: [][]byte{newKey}})
	res, err := retry(retired.connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantBoundaryRefusal(t, res, err)
	wantExists(t, f)

	// The rotating replica verifies with the old key; its own ledger does not
	// know the confirmation, which proves the boundary let it through.
	rotating := newEnv(t, envOptions{roots: []string{before.root}, keys: [][]byte{newKey, oldKey}})
	res, err = retry(rotating.connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantToolRefusal(t, res, err, "no record of this confirmation")
	wantExists(t, f)

	// A server sealing with the new key while still holding the old one.
	rs := before.root
	e := newEnv(t, envOptions{roots: []string{rs}, keys: [][]byte{newKey, oldKey}})
	cs := e.connect(clientOptions{manual: true, answer: accept()})
	state = ask(t, cs, f)
	res, err = retry(newEnv(t, envOptions{roots: []string{rs}, keys: [][]byte{oldKey}}).connect(clientOptions{manual: true, answer: accept()}), f, state, yes())
	wantBoundaryRefusal(t, res, err) // sealed with the new key: a replica still on [old] refuses
	res, err = retry(cs, f, state, yes())
	wantDeleted(t, res, err, f)
}

// The built binary, run over stdio by a real client as a separate process.
func TestBinaryOverStdio(t *testing.T) {
	bin := binary(t)
	root := t.TempDir()
	f := filepath.Join(root, "a.txt")
	if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{eraMRTR, eraLegacy} {
		t.Run(era, func(t *testing.T) {
			if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			ans := accept()
			client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: ans.Handle})
			cmd := exec.Command(bin, "--root", root)
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := call(cs, f)
			wantDeleted(t, res, err, f)
			if len(ans.Questions()) != 1 {
				t.Fatalf("asked %d times", len(ans.Questions()))
			}
		})
	}
}
