package requeststate_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// BenchmarkMiddleware measures the boundary as the server runs it: the
// middleware around a handler, on a tools/call of delete_file with a
// typical path, as each round of a confirmation crosses it.
//
//   - seal: the first round. Binding (arguments digest, principal), the
//     handler's input_required result, its requestState sealed: claims
//     JSON, a salted principal HMAC, AES-256-GCM, base64url.
//   - unseal: the retry. Binding, then the echoed token opened and every
//     claim checked, the plaintext handed to the handler.
//   - forgery: a retry whose token has one character changed. Binding,
//     then AES-GCM authentication fails and the frozen rejection is
//     returned (and logged, here to a discarding handler).
func BenchmarkMiddleware(b *testing.B) {
	ctx := context.Background()
	keys := [][]byte{[]byte("0123456789abcdef0123456789abcdef-bench-key")}
	bd, err := requeststate.New(requeststate.Options{
		Keys:     keys,
		Audience: "bench",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	const plaintext = "confirm.v1.0123456789abcdef0123456789abcdef"
	ask := bd.Middleware()(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Mode: "form", Message: "Delete?"}},
			RequestState:  plaintext,
		}, nil
	})
	answer := bd.Middleware()(func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		if got := req.GetParams().(*mcp.CallToolParamsRaw).RequestState; got != plaintext {
			return nil, errors.New("handler saw " + got)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	request := func(state string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
			Name:         "delete_file",
			Arguments:    json.RawMessage(`{"path":"/srv/data/reports/2026/q3-summary.pdf"}`),
			RequestState: state,
		}}
	}
	first := request("")
	seal := func() (string, error) {
		res, err := ask(ctx, "tools/call", first)
		if err != nil {
			return "", err
		}
		tok := res.(*mcp.CallToolResult).RequestState
		if !strings.HasPrefix(tok, "v1.") {
			return "", errors.New("not sealed: " + tok)
		}
		return tok, nil
	}
	token, err := seal()
	if err != nil {
		b.Fatal(err)
	}
	// One character from the middle of the ciphertext, changed to another
	// base64url digit: still canonical, so it reaches AES-GCM.
	i, c := len(token)/2, "A"
	if token[i] == 'A' {
		c = "B"
	}
	forged := token[:i] + c + token[i+1:]
	accepted := func(context.Context, string, mcp.Request) (mcp.Result, error) { return &mcp.CallToolResult{}, nil }
	// Check once, on a twin boundary that logs, that the forgery is refused
	// by authentication and not earlier.
	var log strings.Builder
	twin, err := requeststate.New(requeststate.Options{Keys: keys, Audience: "bench", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := twin.Middleware()(accepted)(ctx, "tools/call", request(forged)); err == nil || !strings.Contains(log.String(), statetoken.ErrAuth.Error()) {
		b.Fatalf("forgery: %v, log %q; want a rejection for %v", err, log.String(), statetoken.ErrAuth)
	}

	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := seal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unseal", func(b *testing.B) {
		retry := request(token)
		for b.Loop() {
			if _, err := answer(ctx, "tools/call", retry); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("forgery", func(b *testing.B) {
		retry := request(forged)
		for b.Loop() {
			_, err := answer(ctx, "tools/call", retry)
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != requeststate.RejectCode {
				b.Fatalf("forged token: %v, want the rejection", err)
			}
		}
	})
}
