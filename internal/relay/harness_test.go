package relay_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// Protocol eras under test, on either side of the relay.
const (
	eraMRTR   = mcptest.EraMRTR
	eraLegacy = mcptest.EraLegacy
)

var eras = []string{eraMRTR, eraLegacy}

// upstream is an in-process go-sdk MCP server that the relay fronts, with
// a prompt, a resource, a resource template, completions, subscriptions,
// and tools that use the server-to-client features the relay passes on:
// progress, a log message and a sampling request.
type upstream struct {
	t            testing.TB
	server       *mcp.Server
	subscribed   atomic.Int32 // resources/subscribe calls received
	unsubscribed atomic.Int32 // resources/unsubscribe calls received
	sampled      atomic.Int32 // calls of the sample tool received
	connections  atomic.Int32 // connections the relay opened
}

func newUpstream(t testing.TB, era string) *upstream {
	t.Helper()
	u := &upstream{t: t}
	opts := &mcp.ServerOptions{
		Instructions: "upstream instructions",
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-completed"}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			u.subscribed.Add(1)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error {
			u.unsubscribed.Add(1)
			return nil
		},
	}
	if era == eraLegacy {
		opts.SupportedProtocolVersions = []string{eraLegacy, "2025-06-18", "2025-03-26", "2024-11-05"}
	}
	u.server = mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, opts)
	u.server.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
		})
	u.server.AddResource(&mcp.Resource{URI: "file:///hello.txt", Name: "hello"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "hello resource"}}}, nil
		})
	u.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///docs/{name}", Name: "docs"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "doc " + req.Params.URI}}}, nil
		})
	empty := map[string]any{"type": "object"}
	u.server.AddTool(&mcp.Tool{Name: "slow", InputSchema: empty}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 2; i++ {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: "step"})
			}
		}
		//lint:ignore SA1019 the test upstream logs, as older-era servers still do (SEP-2577 deprecates logging)
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "upstream", Data: "a log line"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	// mark reports progress, logs and answers in the caller's own words
	// (its argument who), pausing between, so that calls of two clients
	// interleave on one connection.
	u.server.AddTool(&mcp.Tool{Name: "mark", InputSchema: empty}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Who string `json:"who"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		for i := 1; i <= 3; i++ {
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: args.Who})
			}
			//lint:ignore SA1019 the test upstream logs, as older-era servers still do (SEP-2577 deprecates logging)
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "upstream", Data: "log of " + args.Who})
			time.Sleep(time.Millisecond)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "result for " + args.Who}}}, nil
	})
	u.server.AddTool(&mcp.Tool{Name: "sample", InputSchema: empty}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.sampled.Add(1)
		//lint:ignore SA1019 the test upstream samples, as older-era servers still do (SEP-2577 deprecates sampling)
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled " + res.Content.(*mcp.TextContent).Text}}}, nil
	})
	return u
}

// connect is the relay's Options.Connect: a fresh in-memory connection.
func (u *upstream) connect(ctx context.Context) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := u.server.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	u.connections.Add(1)
	u.t.Cleanup(func() { ss.Close() })
	return ct, nil
}

// env is one relay in front of one upstream, behind the requestState
// boundary as package proxy runs it.
type env struct {
	t     testing.TB
	up    *upstream
	relay *relay.Relay
	log   *mcptest.SyncBuffer
}

// newEnv starts a relay in front of u; each of with changes its options
// first.
func newEnv(t testing.TB, u *upstream, with ...func(*relay.Options)) *env {
	t.Helper()
	e := &env{t: t, up: u, log: &mcptest.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	boundary, err := requeststate.New(requeststate.Options{
		Keys:     [][]byte{[]byte("0123456789abcdef0123456789abcdef-relay-key")},
		Audience: "relay-test",
		Logger:   logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := relay.Options{
		Connect:        u.connect,
		Implementation: &mcp.Implementation{Name: "relay-test", Version: "1"},
		Logger:         logger,
		MaxSessions:    32,
		Receiving:      []mcp.Middleware{boundary.Middleware()},
	}
	for _, f := range with {
		f(&opts)
	}
	r, err := relay.New(ctx, opts)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	e.relay = r
	return e
}

// connect starts a real go-sdk client session to the relay over an
// in-memory transport.
func (e *env) connect(o mcptest.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	return mcptest.Connect(e.t, e.relay.Server(), nil, o)
}

func wantResult(t *testing.T, res *mcp.CallToolResult, err error, want string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the upstream's result, got err=%v res=%s", err, mcptest.Describe(res))
	}
	if !strings.Contains(mcptest.Text(res), want) {
		t.Fatalf("result %q does not mention %q", mcptest.Text(res), want)
	}
}
