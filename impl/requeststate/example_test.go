package requeststate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// A server seals what its tool writes into RequestState; the client only
// ever holds an opaque token, and the handler reads its own plaintext back.
func ExampleBoundary_Middleware() {
	ctx := context.Background()
	b, err := requeststate.New(requeststate.Options{
		Audience: "files", // ephemeral key: nil Keys
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1"}, nil)
	server.AddReceivingMiddleware(b.Middleware())
	server.AddTool(&mcp.Tool{Name: "delete_file", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			bind, _ := requeststate.BindingFrom(ctx)
			if !bind.Verified {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Delete a.txt?"}},
					RequestState:  "confirmation-id-7",
				}, nil
			}
			text := "deleting after " + req.Params.RequestState
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})

	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"},
		&mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	params := &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "a.txt"}}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("needs input:", res.NeedsInput())
	fmt.Println("client sees plaintext:", strings.Contains(res.RequestState, "confirmation"))

	params.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}
	params.RequestState = res.RequestState
	res, err = cs.CallTool(ctx, params)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)

	// The same token for other arguments is refused with the frozen error.
	params.Arguments = map[string]any{"path": "/etc/passwd"}
	_, err = cs.CallTool(ctx, params)
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		fmt.Println(werr.Code, werr.Message, string(werr.Data))
	}
	// Output:
	// needs input: true
	// client sees plaintext: false
	// deleting after confirmation-id-7
	// -32602 Invalid or expired requestState {"reason":"invalid_request_state"}
}

func ExampleNew() {
	// Newest first: it seals; all verify (the mcp-confirm binary reads
	// them from the key file replicas share).
	keys := [][]byte{
		[]byte("secret-number-two-32-bytes-long!"),
		[]byte("secret-number-one-32-bytes-long!"),
	}
	_, err := requeststate.New(requeststate.Options{Keys: keys, Audience: "files"})
	fmt.Println(len(keys), err)

	_, err = requeststate.New(requeststate.Options{Keys: [][]byte{[]byte("too short")}, Audience: "files"})
	fmt.Println(errors.Is(err, requeststate.ErrKey), err)
	// Output:
	// 2 <nil>
	// true requeststate: unusable key: key 0 is 9 bytes, need at least 32
}

func ExampleArgumentsDigest() {
	digest := func(s string) string {
		d, err := requeststate.ArgumentsDigest(json.RawMessage(s))
		if err != nil {
			return err.Error()
		}
		return d[:16]
	}
	fmt.Println(digest(`{"path":"a.txt","force":true}`))
	fmt.Println(digest(` { "force" : true, "path" : "a\u002etxt" } `))
	fmt.Println(digest(``) == digest(`null`) && digest(`null`) == digest(`{}`))
	fmt.Println(digest(`{"n":10000000000000000000001}`) == digest(`{"n":1e22}`))
	fmt.Println(digest(`{"s":"\ud800"}`) == digest(`{"s":"\ufffd"}`))
	fmt.Println(digest(`{"path":"a.txt","path":"/etc/passwd"}`))
	// Output:
	// a6df91ecad7b179e
	// a6df91ecad7b179e
	// true
	// false
	// false
	// requeststate: unacceptable arguments: duplicate object key "path"
}

// In the older protocol era go-sdk asks the client in-process, inside the
// call. When the client's dialog fails the call ends in an error and the
// handler is never called again: AfterCall is where its first round learns
// of it and undoes what it recorded.
func ExampleAfterCall() {
	ctx := context.Background()
	b, err := requeststate.New(requeststate.Options{Audience: "files", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1"}, nil)
	server.AddReceivingMiddleware(b.Middleware())
	server.AddTool(&mcp.Tool{Name: "delete_file", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState != "" {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}, nil
			}
			fmt.Println("recorded pending confirmation 7")
			requeststate.AfterCall(ctx, func(err error) {
				if err != nil {
					fmt.Println("the call failed: cancelling confirmation 7")
				}
			})
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Delete a.txt?"}},
				RequestState:  "confirmation-id-7",
			}, nil
		})

	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("the dialog could not be shown")
		},
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "a.txt"}})
	fmt.Println("call failed:", err != nil)
	// Output:
	// recorded pending confirmation 7
	// the call failed: cancelling confirmation 7
	// call failed: true
}
