package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/relay"
)

// answering is an older-era upstream written line by line: each request
// goes to answer, which returns the lines to write back, or nil for the
// default: initialize answered with mcptest.InitializeResult, anything
// else "method not found". Notifications and responses are not answered.
func answering(answer func(m mcptest.Incoming) [][]byte) func(context.Context) (mcp.Transport, error) {
	return mcptest.Scripted(func(line []byte) [][]byte {
		m, ok := mcptest.Decode(line)
		if !ok || !m.IsRequest() {
			return nil
		}
		if out := answer(m); out != nil {
			return out
		}
		if m.Method == "initialize" {
			return [][]byte{m.Result(mcptest.InitializeResult)}
		}
		return [][]byte{m.Error(jsonrpc.CodeMethodNotFound, "method not found")}
	})
}

// upstreamMeta is the _meta an upstream puts on every result in
// TestRelayDropsUpstreamProtocolMeta: a key of the protocol's own
// namespace, which describes the upstream's hop, and one of its own.
const upstreamMeta = `"_meta":{"io.modelcontextprotocol/hop":"the upstream's","keep":"1"}`

// TestRelayDropsUpstreamProtocolMeta: the protocol's own _meta keys on an
// upstream's results describe the upstream's hop and reach no client, on
// every method the relay forwards, in both eras; the upstream's other
// keys pass through (the control).
func TestRelayDropsUpstreamProtocolMeta(t *testing.T) {
	connect := answering(func(m mcptest.Incoming) [][]byte {
		result := map[string]string{
			"tools/list":               `{"tools":[{"name":"t","inputSchema":{"type":"object"}}],` + upstreamMeta + `}`,
			"tools/call":               `{"content":[{"type":"text","text":"ok"}],` + upstreamMeta + `}`,
			"prompts/list":             `{"prompts":[{"name":"p"}],` + upstreamMeta + `}`,
			"prompts/get":              `{"messages":[],` + upstreamMeta + `}`,
			"resources/list":           `{"resources":[],` + upstreamMeta + `}`,
			"resources/templates/list": `{"resourceTemplates":[],` + upstreamMeta + `}`,
			"resources/read":           `{"contents":[],` + upstreamMeta + `}`,
		}[m.Method]
		if result == "" {
			return nil
		}
		return [][]byte{m.Result(result)}
	})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			cs := e.connect(mcptest.ClientOptions{Era: era})
			ctx := context.Background()
			for method, call := range map[string]func() (mcp.Meta, error){
				"tools/list": func() (mcp.Meta, error) {
					r, err := cs.ListTools(ctx, nil)
					return metaOf(r, err)
				},
				"tools/call": func() (mcp.Meta, error) {
					r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
					return metaOf(r, err)
				},
				"prompts/list": func() (mcp.Meta, error) {
					r, err := cs.ListPrompts(ctx, nil)
					return metaOf(r, err)
				},
				"prompts/get": func() (mcp.Meta, error) {
					r, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p"})
					return metaOf(r, err)
				},
				"resources/list": func() (mcp.Meta, error) {
					r, err := cs.ListResources(ctx, nil)
					return metaOf(r, err)
				},
				"resources/templates/list": func() (mcp.Meta, error) {
					r, err := cs.ListResourceTemplates(ctx, nil)
					return metaOf(r, err)
				},
				"resources/read": func() (mcp.Meta, error) {
					r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///a"})
					return metaOf(r, err)
				},
			} {
				meta, err := call()
				if err != nil {
					t.Fatalf("%s: %v", method, err)
				}
				if _, ok := meta["io.modelcontextprotocol/hop"]; ok || meta["keep"] != "1" {
					t.Errorf("%s: the client got _meta %v; want the upstream's own key only", method, meta)
				}
			}
		})
	}
}

// metaOf returns the _meta of a result r (nil: none) and err.
func metaOf[R interface{ GetMeta() map[string]any }](r R, err error) (mcp.Meta, error) {
	if err != nil {
		return nil, err
	}
	return r.GetMeta(), nil
}

// TestRelayUpstreamFailureSaysOnlyThat: a call whose upstream connection
// fails under it (here the upstream answers a line that is not JSON) gets
// "the upstream server did not answer" and nothing of the failure's own
// words, which may name the upstream's internals; the relay connects
// again for the next call, which the upstream answers (the control).
func TestRelayUpstreamFailureSaysOnlyThat(t *testing.T) {
	var calls atomic.Int32
	connect := answering(func(m mcptest.Incoming) [][]byte {
		switch m.Method {
		case "tools/call":
			if calls.Add(1) == 1 {
				return [][]byte{[]byte("secret-internal-detail: not JSON")}
			}
			return [][]byte{m.Result(`{"content":[{"type":"text","text":"answered"}]}`)}
		}
		return nil
	})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			calls.Store(0)
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			cs := e.connect(mcptest.ClientOptions{Era: era})
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Message != "the upstream server did not answer" {
				t.Fatalf("the failed call: %v; want only that the upstream did not answer", err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
			wantResult(t, res, err, "answered")
		})
	}
}

// TestRelayRoundsBounded: an upstream that asks for input on every round
// of a call gets at most ten rounds from the relay, which plays them for
// an older-era client (nine questions put to it); the call then fails
// saying so. One that asks for nothing in an input_required result (it is
// busy) gets one round, and the client is told to retry later. The relay
// serves the next request after either (the control).
func TestRelayRoundsBounded(t *testing.T) {
	for _, c := range []struct {
		name, result, want string
		rounds, questions  int32
	}{
		{"asks every round", `{"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"again?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"s"}`,
			"more than 10 rounds", 10, 9},
		{"asks nothing", `{"inputRequests":{},"requestState":"s"}`, "busy, retry later", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rounds atomic.Int32
			connect := answering(func(m mcptest.Incoming) [][]byte {
				switch m.Method {
				case "tools/list":
					return [][]byte{m.Result(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)}
				case "tools/call":
					rounds.Add(1)
					return [][]byte{m.Result(c.result)}
				}
				return nil
			})
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			answer := mcptest.Accept()
			cs := e.connect(mcptest.ClientOptions{Era: eraLegacy, Answer: answer})
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || !strings.Contains(werr.Message, c.want) {
				t.Fatalf("the call: %v; want an error saying %q", err, c.want)
			}
			if n, q := rounds.Load(), int32(len(answer.Questions())); n != c.rounds || q != c.questions {
				t.Errorf("the upstream got %d rounds and the client %d questions; want %d and %d", n, q, c.rounds, c.questions)
			}
			if tools, err := cs.ListTools(context.Background(), nil); err != nil || len(tools.Tools) != 1 {
				t.Fatalf("tools/list after: %v, %v", tools, err)
			}
		})
	}
}

// TestRelayToolFreshness: what Upstream.Tool reads from the upstream, and
// when it answers from the list it read last, for an upstream that
// declares tools.listChanged and one that does not; the second adds a tool
// without a word after the first read. A tool the cached list holds is
// answered from it for Cached; a tool it lacks is read again unless the
// list is current (announced changes only, none since); Current reads
// every time unless the upstream announces its changes; Fresh always
// reads.
func TestRelayToolFreshness(t *testing.T) {
	for _, announces := range []bool{true, false} {
		t.Run(fmt.Sprintf("listChanged=%v", announces), func(t *testing.T) {
			var reads atomic.Int32
			var added atomic.Bool
			caps := `{"tools":{}}`
			if announces {
				caps = `{"tools":{"listChanged":true}}`
			}
			connect := answering(func(m mcptest.Incoming) [][]byte {
				switch m.Method {
				case "initialize":
					return [][]byte{m.Result(`{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"scripted","version":"1"}}`)}
				case "tools/list":
					reads.Add(1)
					tools := `{"name":"a","inputSchema":{"type":"object"}}`
					if added.Load() {
						tools += `,{"name":"b","inputSchema":{"type":"object"}}`
					}
					return [][]byte{m.Result(`{"tools":[` + tools + `]}`)}
				}
				return nil
			})
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			ctx := context.Background()
			up, err := e.relay.Upstream(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range []struct {
				name  string
				f     relay.Freshness
				found bool
				read  bool // the upstream's list is read for it
			}{
				{"a", relay.Cached, true, true}, // the first read
				{"a", relay.Cached, true, false},
				{"a", relay.Current, true, !announces},
				{"a", relay.Fresh, true, true},
				{"b", relay.Cached, !announces, !announces}, // added unannounced now (see below)
				{"b", relay.Current, !announces, !announces},
				{"c", relay.Cached, false, !announces},
			} {
				if i == 4 {
					added.Store(true)
				}
				before := reads.Load()
				def, err := up.Tool(ctx, step.name, step.f)
				if err != nil || (def != nil) != step.found || def != nil && def.Name != step.name {
					t.Fatalf("step %d: Tool(%s, %v) = %v, %v; want found: %v", i, step.name, step.f, def, err, step.found)
				}
				if read := reads.Load() != before; read != step.read {
					t.Errorf("step %d: Tool(%s, %v) read the upstream: %v, want %v", i, step.name, step.f, read, step.read)
				}
			}
		})
	}
}

// TestRelaySessionSlotFreedAfterFailedDial: an older-era session whose own
// upstream connection cannot be opened is refused, and gives its slot
// back: more such refusals than MaxSessions leave room for the next
// session once the upstream is back, which is served.
func TestRelaySessionSlotFreedAfterFailedDial(t *testing.T) {
	u := newUpstream(t, eraLegacy)
	var down atomic.Bool
	e := newEnv(t, u, func(o *relay.Options) {
		o.MaxSessions = 2
		o.Connect = func(ctx context.Context) (mcp.Transport, error) {
			if down.Load() {
				return nil, errors.New("the upstream is down")
			}
			return u.connect(ctx)
		}
	})
	down.Store(true)
	for i := range 3 {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := e.relay.Server().Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "refused", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: mcptest.Accept().Handle})
		if _, err := client.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: eraLegacy}); err == nil || !strings.Contains(err.Error(), "cannot reach its upstream") {
			t.Fatalf("session %d with the upstream down: %v, want refused", i, err)
		}
		ss.Close()
	}
	down.Store(false)
	cs := e.connect(mcptest.ClientOptions{Era: eraLegacy, Answer: mcptest.Accept()})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	wantResult(t, res, err, "done")
}

// TestRelayPageIsNotTheList: a client reading one page of the upstream's
// tools (its tools/list passing through) shows the relay a page, not the
// list: the tools on other pages are not taken as removed without an
// announcement, and the cached list stays current.
func TestRelayPageIsNotTheList(t *testing.T) {
	var reads atomic.Int32
	connect := answering(func(m mcptest.Incoming) [][]byte {
		switch m.Method {
		case "tools/list":
			reads.Add(1)
			if strings.Contains(string(m.Params), `"cursor":"2"`) {
				return [][]byte{m.Result(`{"tools":[{"name":"b","inputSchema":{"type":"object"}}]}`)}
			}
			return [][]byte{m.Result(`{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"2"}`)}
		}
		return nil
	})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			ctx := context.Background()
			up, err := e.relay.Upstream(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if def, err := up.Tool(ctx, "b", relay.Current); err != nil || def == nil {
				t.Fatalf("Tool(b): %v, %v", def, err)
			}
			cs := e.connect(mcptest.ClientOptions{Era: era})
			page, err := cs.ListTools(ctx, nil)
			if err != nil || len(page.Tools) != 1 || page.NextCursor != "2" {
				t.Fatalf("the client's first page: %v, %v", page, err)
			}
			before := reads.Load()
			if def, err := up.Tool(ctx, "b", relay.Current); err != nil || def == nil || reads.Load() != before {
				t.Errorf("after the client read a page: Tool(b, Current) = %v, %v, reading the upstream %d times; want b from the cache", def, err, reads.Load()-before)
			}
			if e.relay.Unannounced() {
				t.Error("a page was taken for the list: tools on the next page seemed removed unannounced")
			}
		})
	}
}

// TestRelayReadsPastUpstreamTTL: an upstream of the 2026-07-28 era may mark
// its tools/list results cacheable for a while (ttlMs), which go-sdk's
// client would then answer from its own cache; a read the gate asks for
// reaches the upstream every time.
func TestRelayReadsPastUpstreamTTL(t *testing.T) {
	u := newUpstream(t, eraMRTR)
	var lists atomic.Int32
	u.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && r != nil {
				lists.Add(1)
				r.TTLMs = 60_000
			}
			return res, err
		}
	})
	e := newEnv(t, u)
	ctx := context.Background()
	up, err := e.relay.Upstream(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := lists.Load()
	for range 3 {
		if tools, err := up.Tools(ctx); err != nil || len(tools) == 0 {
			t.Fatalf("Tools: %v, %v", tools, err)
		}
		if def, err := up.Tool(ctx, "slow", relay.Fresh); err != nil || def == nil {
			t.Fatalf("Tool(slow, Fresh): %v, %v", def, err)
		}
	}
	if n := lists.Load() - before; n != 6 {
		t.Errorf("the upstream answered %d of 6 reads; the rest came from a cache", n)
	}
}

// TestRelayToolChangeForgetsEveryConnection: a change to the upstream's
// tools that one connection learns of — an announcement the upstream
// sends on that connection only, or a read catching a change it did not
// announce — empties every connection's cached list, so that none
// answers a check from the definition before it. The shared connection
// and an older-era session's own each cache a in its first version;
// the change is learned on one, and the other must read a's second.
func TestRelayToolChangeForgetsEveryConnection(t *testing.T) {
	for _, announced := range []bool{true, false} {
		t.Run(fmt.Sprintf("announced=%v", announced), func(t *testing.T) {
			var version atomic.Int32
			version.Store(1)
			connect := answering(func(m mcptest.Incoming) [][]byte {
				switch m.Method {
				case "initialize":
					return [][]byte{m.Result(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"scripted","version":"1"}}`)}
				case "tools/list":
					return [][]byte{m.Result(fmt.Sprintf(`{"tools":[{"name":"a","description":"v%d","inputSchema":{"type":"object"}},{"name":"change","inputSchema":{"type":"object"}}]}`, version.Load()))}
				case "tools/call":
					// The change, announced on this connection only (or on
					// none).
					version.Store(2)
					out := [][]byte{m.Result(`{"content":[{"type":"text","text":"changed"}]}`)}
					if announced {
						out = append([][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}, out...)
					}
					return out
				}
				return nil
			})
			e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
			ctx := context.Background()
			ct, st := mcp.NewInMemoryTransports()
			ss, err := e.relay.Server().Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			heard := make(chan struct{}, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "own", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: mcptest.Accept().Handle, // an older-era session of its own upstream connection
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case heard <- struct{}{}:
					default:
					}
				},
			})
			cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: eraLegacy})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			shared, err := e.relay.Upstream(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			own, err := e.relay.Upstream(ctx, ss)
			if err != nil {
				t.Fatal(err)
			}
			if own == shared {
				t.Fatal("the session has no upstream connection of its own")
			}
			for _, up := range []relay.Upstream{shared, own} {
				if def, err := up.Tool(ctx, "a", relay.Current); err != nil || def == nil || def.Description != "v1" {
					t.Fatalf("Tool(a): %v, %v", def, err)
				}
			}
			// The change, through the session's own connection.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "change", Arguments: map[string]any{}})
			wantResult(t, res, err, "changed")
			learned, other := own, shared
			if announced {
				select {
				case <-heard:
				case <-time.After(10 * time.Second):
					t.Fatal("the announcement did not reach the client")
				}
			} else {
				// Not announced: the shared connection's read catches it.
				learned, other = shared, own
				if def, err := learned.Tool(ctx, "a", relay.Fresh); err != nil || def == nil || def.Description != "v2" {
					t.Fatalf("Tool(a, Fresh): %v, %v", def, err)
				}
				if !e.relay.Unannounced() {
					t.Fatal("the unannounced change was not caught")
				}
			}
			if def, err := other.Tool(ctx, "a", relay.Cached); err != nil || def == nil || def.Description != "v2" {
				t.Fatalf("the other connection's Tool(a, Cached) = %v, %v; want the second version", def, err)
			}
		})
	}
}

// rawClient is an older-era client written message by message over an
// in-memory transport to the relay, which declares elicitation and answers
// every question with accept and an empty content (as a client that does
// not validate the answer against the schema sends it), counting them.
type rawClient struct {
	t     *testing.T
	conn  mcp.Connection
	asked int
}

func newRawClient(t *testing.T, e *env) *rawClient {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := e.relay.Server().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{t: t, conn: conn}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if _, ok := c.read().(*jsonrpc.Response); !ok {
		t.Fatal("no answer to initialize")
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rawClient) send(raw string) {
	c.t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(raw))
	if err == nil {
		err = c.conn.Write(context.Background(), msg)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) read() jsonrpc.Message {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.conn.Read(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// call calls the tool and returns its answer's raw result or error,
// answering the questions put on the way.
func (c *rawClient) call(id int, tool string) string {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
	for {
		switch m := c.read().(type) {
		case *jsonrpc.Request:
			if m.Method == "elicitation/create" {
				c.asked++
				b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: m.ID, Result: json.RawMessage(`{"action":"accept","content":{}}`)})
				if err != nil {
					c.t.Fatal(err)
				}
				c.send(string(b))
			}
		case *jsonrpc.Response:
			if m.Error != nil {
				return m.Error.Error()
			}
			return string(m.Result)
		}
	}
}

// TestRelayUpstreamQuestionSchemaLoopRefused: an upstream's question
// (elicitation/create during a call) whose requested schema applies
// itself to the answer in a loop is refused to the upstream before the
// client is asked. go-sdk validates an accepted answer against it, on the
// relay's downstream session and on its upstream client, and
// jsonschema-go's validator recursed until the Go runtime ended the
// whole relay for a stack overflow (no recover stops one); or whose
// schema applies a list's schema twice to each item of any member, which
// took the validator 2^depth steps over an answer's nested lists (one
// CPU spinning, with no way to cancel it). The client is
// never asked, the upstream is told no (or, for the same question in an
// input_required result, which the relay puts to an older-era client
// itself, the call fails saying why), and the relay serves the next call, whose
// question has a flat schema and is put to the client (the control).
func TestRelayUpstreamQuestionSchemaLoopRefused(t *testing.T) {
	for name, looped := range map[string]string{
		"loop":     `{"type":"object","allOf":[{"$ref":"#"}]}`,
		"doubling": `{"type":"object","additionalProperties":{"$ref":"#/$defs/a"},"$defs":{"a":{"type":"array","items":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}}}`,
	} {
		t.Run(name, func(t *testing.T) { upstreamQuestionRefused(t, looped) })
	}
}

func upstreamQuestionRefused(t *testing.T, looped string) {
	const flat = `{"type":"object","properties":{"ok":{"type":"boolean"}}}`
	var (
		call    json.RawMessage // the tools/call waiting for its question's answer
		refused atomic.Int32    // questions the upstream was told no to
	)
	connect := mcptest.Scripted(func(line []byte) [][]byte {
		m, ok := mcptest.Decode(line)
		switch {
		case !ok:
			return nil
		case m.Method == "initialize":
			return [][]byte{m.Result(mcptest.InitializeResult)}
		case m.Method == "tools/call" && strings.Contains(string(m.Params), `"mrtr"`):
			if strings.Contains(string(m.Params), `"inputResponses"`) {
				return [][]byte{m.Result(`{"content":[{"type":"text","text":"answered"}]}`)}
			}
			return [][]byte{m.Result(`{"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":` + looped + `}}},"requestState":"s"}`)}
		case m.Method == "tools/call":
			call = m.ID
			schema := flat
			if strings.Contains(string(m.Params), `"looped"`) {
				schema = looped
			}
			return [][]byte{[]byte(`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"Sure?","requestedSchema":` + schema + `}}`)}
		case string(m.ID) == `"q"` && m.Method == "":
			if strings.Contains(string(line), `"error"`) {
				refused.Add(1)
			}
			return [][]byte{mcptest.Incoming{ID: call}.Result(`{"content":[{"type":"text","text":"answered"}]}`)}
		case m.IsRequest():
			return [][]byte{m.Error(jsonrpc.CodeMethodNotFound, "method not found")}
		}
		return nil
	})
	e := newEnv(t, nil, func(o *relay.Options) { o.Connect = connect })
	c := newRawClient(t, e)
	if got := c.call(2, "looped"); !strings.Contains(got, "answered") || c.asked != 0 || refused.Load() != 1 {
		t.Fatalf("the looping question: %s; the client asked %d times, the upstream refused %d times; want 0 and 1", got, c.asked, refused.Load())
	}
	// The same question in an input_required result, which the relay
	// puts to an older-era client itself: the call fails, unasked.
	if got := c.call(4, "mrtr"); !strings.Contains(got, "cannot be validated in bounded work") || c.asked != 0 {
		t.Fatalf("the looping input request: %s; the client asked %d times; want a refusal saying why, unasked", got, c.asked)
	}
	if got := c.call(3, "flat"); !strings.Contains(got, "answered") || c.asked != 1 || refused.Load() != 1 {
		t.Fatalf("control: %s; the client asked %d times, the upstream refused %d times; want 1 and 1", got, c.asked, refused.Load())
	}
}
