package proxy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// addRelayFeatures gives the upstream a prompt, a resource and a template,
// and tools that use the server-to-client features the proxy relays: a
// question of its own (input_required, which go-sdk turns into an
// in-process elicitation for older clients), progress, a log message and a
// sampling request.
func addRelayFeatures(u *upstream) {
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
	u.server.AddTool(&mcp.Tool{Name: "color", InputSchema: empty}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
			u.record("color", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "painted " + r.Content["color"].(string)}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
			Message:         "Which color? (the upstream's own question)",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}},
		}}, RequestState: "upstream-state"}, nil
	})
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
	u.server.AddTool(&mcp.Tool{Name: "sample", InputSchema: empty}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//lint:ignore SA1019 the test upstream samples, as older-era servers still do (SEP-2577 deprecates sampling)
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled " + res.Content.(*mcp.TextContent).Text}}}, nil
	})
}

const relayPolicy = `name = "files"
allow = ["read", "color", "slow", "sample"]
deny = ["delete"]
`

// Prompts, resources, resource templates and completions pass through
// unchanged, in both eras.
func TestProxyPassThroughFeatures(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			t.Run("client "+down+"/upstream "+up, func(t *testing.T) {
				u := newUpstream(t, up)
				addRelayFeatures(u)
				e := newEnv(t, envOptions{up: u, policy: relayPolicy})
				cs := e.connect(clientOptions{era: down, answer: mcptest.Accept()})
				ctx := context.Background()
				if init := cs.InitializeResult(); init.Instructions != "upstream instructions" || init.Capabilities.Prompts == nil || init.Capabilities.Resources == nil || init.Capabilities.Completions == nil {
					t.Fatalf("initialize = %+v, want the upstream's instructions and capabilities", init)
				}
				prompts, err := cs.ListPrompts(ctx, nil)
				if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greet" {
					t.Fatalf("prompts/list = %+v, %v", prompts, err)
				}
				got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
				if err != nil || got.Messages[0].Content.(*mcp.TextContent).Text != "hello ada" {
					t.Fatalf("prompts/get = %+v, %v", got, err)
				}
				resources, err := cs.ListResources(ctx, nil)
				if err != nil || len(resources.Resources) != 1 || resources.Resources[0].URI != "file:///hello.txt" {
					t.Fatalf("resources/list = %+v, %v", resources, err)
				}
				templates, err := cs.ListResourceTemplates(ctx, nil)
				if err != nil || len(templates.ResourceTemplates) != 1 {
					t.Fatalf("resources/templates/list = %+v, %v", templates, err)
				}
				for uri, want := range map[string]string{"file:///hello.txt": "hello resource", "file:///docs/a": "doc file:///docs/a"} {
					r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					if err != nil || r.Contents[0].Text != want {
						t.Fatalf("resources/read %s = %+v, %v", uri, r, err)
					}
				}
				c, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "ad"}})
				if err != nil || len(c.Completion.Values) != 1 || c.Completion.Values[0] != "ad-completed" {
					t.Fatalf("completion/complete = %+v, %v", c, err)
				}
			})
		}
	}
}

// The upstream's own question inside an allowed call reaches the client:
// in-band as input_required (an upstream of the 2026-07-28 era), or as an
// elicitation request relayed on the session's own upstream connection (an
// older upstream, older client). An older upstream cannot put its question
// to a 2026-07-28 client (which cannot receive server-initiated requests):
// the call fails cleanly and nothing runs.
func TestProxyRelaysUpstreamQuestion(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			for _, transport := range []string{inMemory, httpT} {
				t.Run("client "+down+"/upstream "+up+"/"+transport, func(t *testing.T) {
					u := newUpstream(t, up)
					addRelayFeatures(u)
					e := newEnv(t, envOptions{up: u, policy: relayPolicy})
					var asked []string
					copts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked = append(asked, req.Params.Message)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}, nil
					}}
					cs := e.connect(clientOptions{era: down, copts: copts, transport: transport})
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color"})
					if down == eraMRTR && up == eraLegacy {
						if err == nil && !res.IsError {
							t.Fatalf("want a clean failure, got %s", mcptest.Describe(res))
						}
						u.wantCalls(t, "color", 0)
						return
					}
					wantResult(t, res, err, "painted blue")
					if len(asked) != 1 || asked[0] != "Which color? (the upstream's own question)" {
						t.Fatalf("the client was asked %q, want the upstream's question once", asked)
					}
					u.wantCalls(t, "color", 1)
				})
			}
		}
	}
}

// Progress notifications come back to the caller with its own token; a tool
// list change upstream is announced downstream; an older client gets the
// upstream's log messages at the level it set and answers its sampling
// requests.
func TestProxyRelaysNotificationsAndSampling(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			addRelayFeatures(u)
			e := newEnv(t, envOptions{up: u, policy: relayPolicy})
			var (
				mu       sync.Mutex
				progress []any
				logs     []string
				changed  = make(chan struct{}, 10)
			)
			copts := &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.ProgressToken)
					mu.Unlock()
				},
				//lint:ignore SA1019 the test client receives the upstream's relayed log messages (SEP-2577 deprecates logging)
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					mu.Lock()
					logs = append(logs, req.Params.Data.(string))
					mu.Unlock()
				},
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				//lint:ignore SA1019 the test client answers the upstream's relayed sampling request (SEP-2577 deprecates sampling)
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					//lint:ignore SA1019 the test client answers the upstream's relayed sampling request (SEP-2577 deprecates sampling)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "from the client"}}, nil
				},
			}
			cs := e.connect(clientOptions{era: down, copts: copts})
			ctx := context.Background()
			if down == eraLegacy {
				//lint:ignore SA1019 the test client sets the level the relayed log messages are sent at (SEP-2577 deprecates logging)
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
			}
			params := &mcp.CallToolParams{Name: "slow"}
			params.SetProgressToken("my-token")
			res, err := cs.CallTool(ctx, params)
			wantResult(t, res, err, "done")
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n, l := len(progress), len(logs)
				mu.Unlock()
				if n == 2 && (down == eraMRTR || l == 1) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("got %d progress notifications and %d log messages\n%s", n, l, e.log.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			if progress[0] != "my-token" || progress[1] != "my-token" || (down == eraLegacy && logs[0] != "a log line") {
				t.Fatalf("progress tokens %v, logs %v", progress, logs)
			}
			mu.Unlock()

			u.server.AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no tools/list_changed reached the client")
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || !strings.Contains(toolNames(tools), "added") {
				t.Fatalf("tools/list after the change = %s, %v", toolNames(tools), err)
			}

			if down == eraLegacy {
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample"})
				wantResult(t, res, err, "sampled from the client")
			}
		})
	}
}

func toolNames(r *mcp.ListToolsResult) string {
	if r == nil {
		return ""
	}
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}

// A client's cancellation reaches the upstream: the call the upstream is
// running is cancelled there too.
func TestProxyRelaysCancellation(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			started, cancelled := make(chan struct{}), make(chan struct{})
			u.server.AddTool(&mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				close(started)
				<-ctx.Done()
				close(cancelled)
				return nil, ctx.Err()
			})
			e := newEnv(t, envOptions{up: u, policy: "allow = [\"wait\"]"})
			cs := e.connect(clientOptions{era: down})
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-started
				cancel()
			}()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait"}); err == nil {
				t.Fatal("a cancelled call returned no error")
			}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream's call was not cancelled")
			}
		})
	}
}

// A resource subscription is forwarded, and the upstream's
// resources/updated reaches the subscribed client, in both eras.
func TestProxyRelaysResourceUpdates(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			addRelayFeatures(u)
			e := newEnv(t, envOptions{up: u, policy: relayPolicy})
			updated := make(chan string, 10)
			cs := e.connect(clientOptions{era: down, copts: &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
			}})
			if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "file:///hello.txt"}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for u.subscribed.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the subscription did not reach the upstream")
				}
				time.Sleep(5 * time.Millisecond)
			}
			u.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "file:///hello.txt"})
			select {
			case uri := <-updated:
				if uri != "file:///hello.txt" {
					t.Fatalf("updated %q", uri)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("resources/updated did not reach the client")
			}
		})
	}
}

// An approved call whose upstream (2026-07-28) asks a follow-up question:
// the question reaches the client, the answer is forwarded once, and the
// round carrying it is single-use like the approval (a replay sends
// nothing).
func TestProxyFollowUpOnce(t *testing.T) {
	u := newUpstream(t, eraMRTR)
	addRelayFeatures(u)
	e := newEnv(t, envOptions{up: u, policy: `ask = ["color"]`})
	cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
	call := func(state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "color", Arguments: map[string]any{}, InputResponses: responses, RequestState: state})
	}
	res, err := call("", nil)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
	}
	res, err = call(res.RequestState, mcp.InputResponseMap{"confirm": mcptest.Yes()})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("approved round: want the upstream's own question, got err=%v res=%s", err, mcptest.Describe(res))
	}
	q, ok := res.InputRequests["color"].(*mcp.ElicitParams)
	if !ok || q.Message != "Which color? (the upstream's own question)" {
		t.Fatalf("the upstream's question did not come through: %+v", res.InputRequests)
	}
	followUp := res.RequestState
	answer := mcp.InputResponseMap{"color": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}}
	res, err = call(followUp, answer)
	wantResult(t, res, err, "painted blue")
	u.wantCalls(t, "color", 1)
	res, err = call(followUp, answer)
	mcptest.WantToolRefusal(t, res, err, "already used")
	u.wantCalls(t, "color", 1)
}
