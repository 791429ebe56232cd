package proxy_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// rawTool adds to u a tool that takes any arguments (input schema
// schema, or any object when nil) and records each call's raw arguments.
func rawTool(u *upstream, name string, schema any) func() []string {
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	var mu sync.Mutex
	var got []string
	u.server.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		got = append(got, string(req.Params.Arguments))
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	})
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

// A string and a literal that read alike — false and "false", 5 and "5",
// null and "null", ["a"] and "[\"a\"]" — give different questions, each
// naming the value's JSON type, with only the string between « and »;
// and the approved call sends the upstream exactly the value shown, of
// that type. Both eras, through a real go-sdk client and the proxy.
func TestProxyStringAndLiteralShownApart(t *testing.T) {
	pairs := []struct {
		literal, str           string // the value of "force" in JSON
		literalShown, strShown string // the question's line for it, isolates removed
	}{
		{`false`, `"false"`, "- «force»: boolean false", "- «force»: string «false»"},
		{`true`, `"true"`, "- «force»: boolean true", "- «force»: string «true»"},
		{`5`, `"5"`, "- «force»: number 5", "- «force»: string «5»"},
		{`-0.5`, `"-0.5"`, "- «force»: number -0.5", "- «force»: string «-0.5»"},
		{`null`, `"null"`, "- «force»: null", "- «force»: string «null»"},
		{`["a"]`, `"[\"a\"]"`, "- «force»: array [«a»]", "- «force»: string «[\"a\"]»"},
		{`{"a":1}`, `"{\"a\":1}"`, "- «force»: object {«a»: 1}", "- «force»: string «{\"a\":1}»"},
		{`[]`, `"[]"`, "- «force»: array []", "- «force»: string «[]»"},
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			u := newUpstream(t, eraMRTR)
			sent := rawTool(u, "run", nil)
			e := newEnv(t, envOptions{up: u})
			a := mcptest.Accept()
			cs := e.connect(clientOptions{era: era, answer: a})
			ask := func(value string) string {
				t.Helper()
				n := len(a.Questions())
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: json.RawMessage(`{"force":` + value + `}`)})
				wantResult(t, res, err, "ran")
				q := a.Questions()
				if len(q) != n+1 {
					t.Fatalf("asked %d times for %s, want once", len(q)-n, value)
				}
				// Exactly the value shown, of its type, reached the upstream.
				s := sent()
				var got, want any
				if json.Unmarshal([]byte(s[len(s)-1]), &got) != nil || json.Unmarshal([]byte(`{"force":`+value+`}`), &want) != nil {
					t.Fatalf("upstream got %s", s[len(s)-1])
				}
				if g, _ := json.Marshal(got); string(g) != string(mustMarshal(t, want)) {
					t.Fatalf("upstream got %s, want %s", g, mustMarshal(t, want))
				}
				return q[n]
			}
			for _, p := range pairs {
				ql, qs := ask(p.literal), ask(p.str)
				if ql == qs {
					t.Errorf("%s and %s give the same question:\n%s", p.literal, p.str, ql)
				}
				if !lineOf(visible(ql), p.literalShown) {
					t.Errorf("the question for %s lacks the line %q:\n%s", p.literal, p.literalShown, visible(ql))
				}
				if !lineOf(visible(qs), p.strShown) {
					t.Errorf("the question for %s lacks the line %q:\n%s", p.str, p.strShown, visible(qs))
				}
			}
			if n := len(sent()); n != 2*len(pairs) {
				t.Fatalf("upstream ran %d calls, want %d", n, 2*len(pairs))
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineOf reports whether q has line as one of its lines.
func lineOf(q, line string) bool {
	for l := range strings.SplitSeq(q, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
