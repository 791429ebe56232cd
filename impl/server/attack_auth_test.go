package server_test

// Attacks by other HTTP callers who hold valid tokens of their own.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// bearerServer serves e over HTTP behind go-sdk's bearer-token middleware,
// each token in users standing for its user.
func bearerServer(t *testing.T, e *env, users map[string]string) *httptest.Server {
	t.Helper()
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u, ok := users[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
	}
	hs := httptest.NewServer(auth.RequireBearerToken(verify, nil)(e.srv.Handler()))
	t.Cleanup(hs.Close)
	return hs
}

// bearerSession connects a real go-sdk client to url with token, answering
// questions by hand (MRTR) so that they stay pending until answered.
func bearerSession(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + token}}, http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: accept().handle,
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Layer: ledger (per-principal cap). Mallory, who holds a valid token,
// asks question after question and never answers, to lock everyone else
// out until they expire. She fills her own cap and is refused; Alice still
// gets her question, and her approval deletes her file. On every store the
// binary can use, with its default caps.
func TestAttackCapExhaustion(t *testing.T) {
	stores := map[string]string{"memory": "memory:"}
	for kind, url := range sharedStores(t) {
		stores[kind] = url
	}
	for kind, url := range stores {
		t.Run(kind, func(t *testing.T) {
			if kind != "memory" {
				url = storeURL(t, kind, url)
			}
			root := t.TempDir()
			e := replica(t, url, uniqueName(t), root)
			e.root = root
			hs := bearerServer(t, e, map[string]string{"mallory-token": "mallory", "alice-token": "alice"})
			mallory := bearerSession(t, hs.URL, "mallory-token")

			const perPrincipal = ledger.DefaultMaxPendingPerPrincipal
			var bait []string
			for i := range perPrincipal {
				f := e.file(fmt.Sprintf("bait-%d.txt", i), "x")
				ask(t, mallory, f)
				bait = append(bait, f)
			}
			res, err := call(mallory, e.file("one-more.txt", "x"))
			wantToolRefusal(t, res, err, "Too many confirmations are waiting")
			if n := e.count(ledger.ActionIssue, ledger.ResultFull); n != 1 {
				t.Fatalf("ledger refused %d issues as full, want 1 (the refusal must come from the ledger's cap)", n)
			}

			alice := bearerSession(t, hs.URL, "alice-token")
			f := e.file("alice.txt", "a")
			state := ask(t, alice, f)
			res, err = retry(alice, f, state, yes())
			wantDeleted(t, res, err, f)
			wantExists(t, bait...)
			if n := e.issued(); n != perPrincipal+1 {
				t.Fatalf("ledger issued %d, want Mallory's %d and Alice's one", n, perPrincipal)
			}
		})
	}
}
