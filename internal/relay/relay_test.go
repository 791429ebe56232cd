package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// Prompts, resources, resource templates and completions pass through
// unchanged, in both eras.
func TestRelayPassThroughFeatures(t *testing.T) {
	for _, down := range eras {
		for _, up := range eras {
			t.Run("client "+down+"/upstream "+up, func(t *testing.T) {
				e := newEnv(t, newUpstream(t, up))
				cs := e.connect(mcptest.ClientOptions{Era: down, Answer: mcptest.Accept()})
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

// Progress notifications come back to the caller with its own token; a tool
// list change upstream is announced downstream; an older client gets the
// upstream's log messages at the level it set and answers its sampling
// requests.
func TestRelayNotificationsAndSampling(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			e := newEnv(t, u)
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
			cs := e.connect(mcptest.ClientOptions{Era: down, Client: copts})
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
func TestRelayCancellation(t *testing.T) {
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
			e := newEnv(t, u)
			cs := e.connect(mcptest.ClientOptions{Era: down})
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
func TestRelayResourceUpdates(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			e := newEnv(t, u)
			updated := make(chan string, 10)
			cs := e.connect(mcptest.ClientOptions{Era: down, Client: &mcp.ClientOptions{
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
			// The upstream holding the subscription does not mean the
			// downstream server has registered the client's yet (go-sdk
			// does so after the handler returns, and a 2026-07-28 client's
			// listen stream is opened apart from its Subscribe): under load
			// a first update can precede it. An update is a notification
			// that may repeat, so it is sent again until one arrives.
			timeout := time.After(5 * time.Second)
			for received := false; !received; {
				u.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "file:///hello.txt"})
				select {
				case uri := <-updated:
					if uri != "file:///hello.txt" {
						t.Fatalf("updated %q", uri)
					}
					received = true
				case <-time.After(250 * time.Millisecond):
				case <-timeout:
					t.Fatal("resources/updated did not reach the client")
				}
			}
		})
	}
}

// The seam a gate uses: Receiving runs before the relay on every request,
// Listed decides what tools/list shows, and CallTool sees every tools/call
// round and forwards through the Upstream it is handed, or not at all.
func TestRelayGateHooks(t *testing.T) {
	for _, down := range eras {
		t.Run(down, func(t *testing.T) {
			u := newUpstream(t, eraLegacy)
			var (
				mu   sync.Mutex
				seen []string
			)
			saw := func(s string) {
				mu.Lock()
				seen = append(seen, s)
				mu.Unlock()
			}
			e := newEnv(t, u, func(o *relay.Options) {
				o.Receiving = append(o.Receiving, func(next mcp.MethodHandler) mcp.MethodHandler {
					return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
						if method == "tools/call" {
							saw("receiving")
						}
						return next(ctx, method, req)
					}
				})
				o.Listed = func(t *mcp.Tool) bool { return t.Name != "sample" }
				o.CallTool = func(ctx context.Context, up relay.Upstream, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					saw("gate " + req.Params.Name)
					if req.Params.Name == "sample" {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused by the gate"}}}, nil
					}
					if def, err := up.Tool(ctx, req.Params.Name, relay.Current); err != nil || def == nil {
						return nil, fmt.Errorf("the gate could not read %s: %v", req.Params.Name, err)
					}
					return up.CallTool(ctx, req, req.Params.Arguments, req.Params.RequestState, req.Params.InputResponses)
				}
			})
			cs := e.connect(mcptest.ClientOptions{Era: down})
			ctx := context.Background()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || !strings.Contains(toolNames(tools), "slow") || strings.Contains(toolNames(tools), "sample") {
				t.Fatalf("tools/list = %s, %v; want slow listed and sample not", toolNames(tools), err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
			wantResult(t, res, err, "done")
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample"})
			mcptest.WantToolRefusal(t, res, err, "refused by the gate")
			if n := u.sampled.Load(); n != 0 {
				t.Fatalf("the upstream ran a call the gate refused %d times", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if got, want := strings.Join(seen, ", "), "receiving, gate slow, receiving, gate sample"; got != want {
				t.Fatalf("hooks ran as %q, want %q", got, want)
			}
		})
	}
}

// 2026-07-28 clients share one upstream connection: a resource
// subscription is sent upstream once, one subscriber leaving does not end
// it for the others, and the last one leaving ends it upstream, once —
// although go-sdk tells the relay of it with a cancelled context.
func TestRelaySubscriptionsShared(t *testing.T) {
	u := newUpstream(t, eraLegacy)
	e := newEnv(t, u)
	ctx := context.Background()
	updated := make(chan string, 10)
	first := e.connect(mcptest.ClientOptions{Era: eraMRTR})
	second := e.connect(mcptest.ClientOptions{Era: eraMRTR, Client: &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	}})
	const uri = "file:///hello.txt"
	for _, cs := range []*mcp.ClientSession{first, second} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	// A 2026-07-28 client subscribes and unsubscribes by opening and ending
	// a subscriptions/listen stream, which the relay hears of after
	// Subscribe and Unsubscribe return; the downstream server logs each.
	waitLog := func(msg string, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(e.log.String(), msg) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the relay did not log %q %d times\n%s", msg, n, e.log.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitLog(`msg="resource subscribed"`, 2)
	if n := u.subscribed.Load(); n != 1 {
		t.Fatalf("two subscriptions on the shared connection reached the upstream %d times, want once", n)
	}
	if err := first.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	waitLog(`msg="resource unsubscribed"`, 1)
	if n := u.unsubscribed.Load(); n != 0 {
		t.Fatalf("one client's unsubscribe ended the other's subscription upstream (%d unsubscribes)", n)
	}
	u.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("updated %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("resources/updated no longer reaches the subscriber that stayed")
	}
	if err := second.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	waitLog(`msg="resource unsubscribed"`, 2)
	for deadline := time.Now().Add(5 * time.Second); u.unsubscribed.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the last subscriber left, and the unsubscribe never reached the upstream")
		}
	}
	if n := u.unsubscribed.Load(); n != 1 {
		t.Fatalf("the last subscriber leaving reached the upstream %d times, want once", n)
	}
}

// A method outside the MCP specification is not forwarded: the client gets
// "method not found" (go-sdk does not decode it, so the relay never sees
// it).
func TestRelayUnknownMethod(t *testing.T) {
	e := newEnv(t, newUpstream(t, eraLegacy))
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.relay.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	call := func(id int64, method string, params string) *jsonrpc.Response {
		t.Helper()
		rid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := m.(*jsonrpc.Response); ok && r.ID == rid {
				return r
			}
		}
	}
	if r := call(1, "initialize", `{"protocolVersion":"`+eraLegacy+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`); r.Error != nil {
		t.Fatalf("initialize: %v", r.Error)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r := call(2, "vendor/unknown", `{}`)
	var werr *jsonrpc.Error
	if !errors.As(r.Error, &werr) || werr.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("vendor/unknown answered %+v, want method not found", r)
	}
}

// Older-era clients that declare no elicitation, sampling or roots
// capability share the upstream connection, and what the upstream sends
// for one of them never reaches the other: two such clients over HTTP,
// using the same progress token, call a tool at once, many times over; each
// gets only its own progress and its own results, and neither gets the
// upstream's log messages, which name no session. A client that declares
// a capability (the negative control) gets a connection of its own.
func TestRelaySharedConnectionIsolation(t *testing.T) {
	u := newUpstream(t, eraLegacy)
	e := newEnv(t, u)
	h, err := serve.NewHTTP(e.relay.Server(), serve.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		mu       sync.Mutex
		progress []string
		logs     []string
	}
	clients := map[string]*mcp.ClientSession{}
	saw := map[string]*seen{}
	for _, who := range []string{"alice", "bob"} {
		s := &seen{}
		saw[who] = s
		clients[who] = mcptest.Connect(t, e.relay.Server(), h, mcptest.ClientOptions{Era: eraLegacy, Transport: mcptest.HTTP, Client: &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{},
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				s.mu.Lock()
				s.progress = append(s.progress, fmt.Sprintf("%v:%s", req.Params.ProgressToken, req.Params.Message))
				s.mu.Unlock()
			},
			//lint:ignore SA1019 the test client would receive relayed log messages (SEP-2577 deprecates logging)
			LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				s.mu.Lock()
				s.logs = append(s.logs, fmt.Sprint(req.Params.Data))
				s.mu.Unlock()
			},
		}})
		//lint:ignore SA1019 the test client asks for the log messages it must not get (SEP-2577 deprecates logging)
		if err := clients[who].SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := u.connections.Load(); n != 1 {
		t.Fatalf("two clients without capabilities opened %d upstream connections, want the shared one only", n)
	}
	const calls = 20
	var wg sync.WaitGroup
	for who, cs := range clients {
		for range calls {
			wg.Go(func() {
				params := &mcp.CallToolParams{Name: "mark", Arguments: map[string]any{"who": who}}
				params.SetProgressToken("same-token")
				res, err := cs.CallTool(context.Background(), params)
				if err != nil || res.IsError || mcptest.Text(res) != "result for "+who {
					t.Errorf("%s got err=%v res=%s", who, err, mcptest.Describe(res))
				}
			})
		}
	}
	wg.Wait()
	// Progress is relayed best effort (one that arrives after its call's
	// stream closed is lost): wait for all of it, or for a while, then a
	// little more for any stray.
	deadline := time.Now().Add(5 * time.Second)
	for {
		done := true
		for _, s := range saw {
			s.mu.Lock()
			done = done && len(s.progress) >= 3*calls
			s.mu.Unlock()
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	for who, s := range saw {
		s.mu.Lock()
		if len(s.progress) == 0 || len(s.progress) > 3*calls {
			t.Errorf("%s got %d progress notifications, want 1 to %d: %v", who, len(s.progress), 3*calls, s.progress)
		}
		t.Logf("%s got %d of its %d progress notifications", who, len(s.progress), 3*calls)
		for _, p := range s.progress {
			if p != "same-token:"+who {
				t.Errorf("%s got progress %q, not its own", who, p)
			}
		}
		if len(s.logs) != 0 {
			t.Errorf("%s got the shared connection's log messages: %v", who, s.logs)
		}
		s.mu.Unlock()
	}
	if n := u.connections.Load(); n != 1 {
		t.Fatalf("the calls opened %d upstream connections, want the shared one only", n)
	}

	// The control: a client that can answer the upstream's questions gets
	// a connection of its own.
	own := mcptest.Connect(t, e.relay.Server(), h, mcptest.ClientOptions{Era: eraLegacy, Transport: mcptest.HTTP, Answer: mcptest.Accept(),
		Client: &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}})
	res, err := own.CallTool(context.Background(), &mcp.CallToolParams{Name: "mark", Arguments: map[string]any{"who": "carol"}})
	wantResult(t, res, err, "result for carol")
	if n := u.connections.Load(); n != 2 {
		t.Fatalf("a client that declared elicitation left %d upstream connections, want 2 (its own)", n)
	}
}

// An older-era session on the shared connection that ends while subscribed
// releases its subscription upstream; another session's stays.
func TestRelaySharedSessionReleasesSubscriptions(t *testing.T) {
	u := newUpstream(t, eraLegacy)
	e := newEnv(t, u)
	ctx := context.Background()
	const uri = "file:///hello.txt"
	capless := mcptest.ClientOptions{Era: eraLegacy, Client: &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}}
	stays := e.connect(capless)
	leaves := e.connect(capless)
	for _, cs := range []*mcp.ClientSession{stays, leaves} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := u.subscribed.Load(), u.connections.Load(); n != 1 || m != 1 {
		t.Fatalf("two subscriptions on the shared connection: %d subscribes upstream on %d connections, want 1 on 1", n, m)
	}
	leaves.Close()
	time.Sleep(200 * time.Millisecond)
	if n := u.unsubscribed.Load(); n != 0 {
		t.Fatalf("a session leaving ended the subscription another still holds (%d unsubscribes)", n)
	}
	stays.Close()
	deadline := time.Now().Add(5 * time.Second)
	for u.unsubscribed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the last subscriber left and the upstream got %d unsubscribes, want 1\n%s", u.unsubscribed.Load(), e.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
