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

// Before asking, the arguments are checked against the tool's input
// schema (with jsonschema-go, go-sdk's validator). A value of the wrong
// JSON type is refused by the proxy with its place and the type the schema
// wants; any other mismatch, or a schema the proxy cannot check, is
// refused too. Nothing is asked, issued or forwarded. Controls: the same
// tool with matching arguments is asked and runs.
func TestProxySchemaTypeMismatchRefused(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"force": map[string]any{"type": "boolean"},
			"count": map[string]any{"type": "integer"},
			"ratio": map[string]any{"type": "number"},
			"maybe": map[string]any{"type": []string{"string", "null"}},
			"opts": map[string]any{"type": "object", "properties": map[string]any{
				"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			}},
			"mode": map[string]any{"$ref": "#/$defs/mode"},
		},
		"$defs":    map[string]any{"mode": map[string]any{"type": "string"}},
		"required": []string{"force"},
	}
	tests := []struct {
		name, args string
		want       string // in the refusal; "" means asked and run
	}{
		{"string for a boolean", `{"force":"false"}`, "the argument «\u2068force\u2069» is a string, but the input schema of «\u2068typed\u2069» wants a boolean"},
		{"number for a boolean", `{"force":0}`, "«\u2068force\u2069» is an integer, but the input schema of «\u2068typed\u2069» wants a boolean"},
		{"fraction for an integer", `{"force":true,"count":1.5}`, "«\u2068count\u2069» is a number, but the input schema of «\u2068typed\u2069» wants an integer"},
		{"string for a number", `{"force":true,"ratio":"0.5"}`, "«\u2068ratio\u2069» is a string, but the input schema of «\u2068typed\u2069» wants a number"},
		{"array item", `{"force":true,"opts":{"tags":["a",5]}}`, "the value at «\u2068opts\u2069».«\u2068tags\u2069»[1] is an integer, but the input schema of «\u2068typed\u2069» wants a string"},
		{"through a $ref", `{"force":true,"mode":["fast"]}`, "«\u2068mode\u2069» is an array, but the input schema of «\u2068typed\u2069» wants a string"},
		{"boolean for a string or null", `{"force":true,"maybe":false}`, "«\u2068maybe\u2069» is a boolean, but the input schema of «\u2068typed\u2069» wants one of a string, null"},
		{"required argument missing", `{"count":1}`, "do not match the input schema of «\u2068typed\u2069»"},
		{"control: every type right", `{"force":false,"count":3,"ratio":0.5,"maybe":null,"opts":{"tags":["a"]},"mode":"fast"}`, ""},
		{"control: an integer for a number", `{"force":true,"ratio":2}`, ""},
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			u := newUpstream(t, eraMRTR)
			sent := rawTool(u, "typed", schema)
			odd := rawTool(u, "odd", map[string]any{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"})
			e := newEnv(t, envOptions{up: u})
			a := mcptest.Accept()
			cs := e.connect(clientOptions{era: era, answer: a})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					asked, issued, ran := len(a.Questions()), e.issued(), len(sent())
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "typed", Arguments: json.RawMessage(tt.args)})
					if tt.want == "" {
						wantResult(t, res, err, "ran")
						if len(a.Questions()) != asked+1 || len(sent()) != ran+1 {
							t.Fatalf("control: asked %d, ran %d times, want once each", len(a.Questions())-asked, len(sent())-ran)
						}
						return
					}
					mcptest.WantToolRefusal(t, res, err, tt.want)
					mcptest.WantToolRefusal(t, res, err, "Nothing was asked or sent.")
					if len(a.Questions()) != asked || e.issued() != issued || len(sent()) != ran {
						t.Fatalf("asked %d, issued %d, forwarded %d; want none", len(a.Questions())-asked, e.issued()-issued, len(sent())-ran)
					}
				})
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "odd", Arguments: json.RawMessage(`{}`)})
			mcptest.WantToolRefusal(t, res, err, "a JSON Schema draft the proxy cannot check")
			if len(odd()) != 0 {
				t.Fatal("a call under a schema the proxy cannot check was forwarded")
			}
		})
	}
}

// A number that readers using IEEE-754 doubles (JavaScript, Python's
// float) would read as another number is refused before asking, as a lone
// surrogate is, wherever it stands in the arguments, with the number read
// instead: the question would show one number and the upstream act on
// another. Nothing is asked, issued or forwarded. Controls: numbers every
// reader reads alike — 2^53, 0.1, 1e23, 1.50 — are asked, and the upstream
// receives them as written. Both eras, in memory and over streamable HTTP
// (where the numbers travel as the client wrote them, through go-sdk's
// HTTP handler, to the boundary and the proxy). One layer refuses before
// the proxy there: on 2026-07-28, go-sdk's streamable transport reads the
// tool's name from the body to check the Mcp-Name header, and arguments
// holding 1e400 cannot be read into its float64 (the client sends no
// header; the server answers 400 Bad Request); nothing reaches the proxy.
func TestProxyInexactNumberRefused(t *testing.T) {
	tests := []struct {
		name, args string
		want       string // in the refusal; "" means asked and run
		transport  string // over HTTP on 2026-07-28, go-sdk's transport refuses first, saying this
	}{
		{"2^53+1", `{"n":9007199254740993}`, "at «\u2068n\u2069»: the number 9007199254740993 is read as 9007199254740992 by readers that use IEEE-754 doubles", ""},
		{"in an array", `{"n":[1,-9007199254740993]}`, "at «\u2068n\u2069»[1]: the number -9007199254740993 is read as -9007199254740992", ""},
		{"an id of 18 digits", `{"id":123456789012345678}`, "the number 123456789012345678 is read as 123456789012345680", ""},
		{"more digits than a double keeps", `{"o":{"x":0.1000000000000000055511151231257827}}`, "at «\u2068o\u2069».«\u2068x\u2069»: the number 0.1000000000000000055511151231257827 is read as 0.1", ""},
		{"past the largest double", `{"n":1e400}`, "the number 1e400 is beyond the largest IEEE-754 double", `missing required Mcp-Name header for method "tools/call"`},
		{"below the smallest", `{"n":1e-400}`, "the number 1e-400 is read as 0", ""},
		{"control: 2^53", `{"n":9007199254740992}`, "", ""},
		{"control: 0.1", `{"n":0.1}`, "", ""},
		{"control: 1e23 and 1.50", `{"n":[1e23,1.50]}`, "", ""},
	}
	for _, era := range eras {
		for _, transport := range []string{inMemory, httpT} {
			t.Run(era+"/"+transport, func(t *testing.T) {
				u := newUpstream(t, eraMRTR)
				sent := rawTool(u, "run", nil)
				e := newEnv(t, envOptions{up: u})
				a := mcptest.Accept()
				cs := e.connect(clientOptions{era: era, answer: a, transport: transport})
				for _, tt := range tests {
					t.Run(tt.name, func(t *testing.T) {
						asked, issued, ran := len(a.Questions()), e.issued(), len(sent())
						res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: json.RawMessage(tt.args)})
						if tt.want == "" {
							wantResult(t, res, err, "ran")
							s := sent()
							if len(a.Questions()) != asked+1 || len(s) != ran+1 || s[len(s)-1] != tt.args {
								t.Fatalf("control: asked %d, ran %d times (last with %v); want once, with %s", len(a.Questions())-asked, len(s)-ran, s, tt.args)
							}
							return
						}
						switch {
						case tt.transport != "" && transport == httpT && era == eraMRTR:
							if err == nil || !strings.Contains(err.Error(), tt.transport) || !strings.Contains(err.Error(), "Bad Request") {
								t.Fatalf("want go-sdk's transport to refuse (%s), got err=%v res=%s", tt.transport, err, mcptest.Describe(res))
							}
						default:
							mcptest.WantToolRefusal(t, res, err, "refused before asking")
							mcptest.WantToolRefusal(t, res, err, tt.want)
						}
						if len(a.Questions()) != asked || e.issued() != issued || len(sent()) != ran {
							t.Fatalf("asked %d, issued %d, forwarded %d; want none", len(a.Questions())-asked, e.issued()-issued, len(sent())-ran)
						}
					})
				}
			})
		}
	}
}

// TestProxySchemaLoopRefused: an upstream whose tool's input schema
// applies its own subschemas to one value in a loop (jsonschema-go's
// validator recursed until the Go runtime ended the whole proxy for a
// stack overflow, no recover possible), or applies a list's schema twice
// to each of its items (the validator's work doubled with each level of
// nesting: years for an argument of 40 nested lists, one CPU spinning
// with no way to cancel it), has every call of that tool refused before
// anything is asked, issued or sent, in both eras, and the proxy goes on
// serving: a call of another tool is asked and runs (the control).
func TestProxySchemaLoopRefused(t *testing.T) {
	loop := map[string]any{
		"type":       "object",
		"properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/a"}},
		"$defs": map[string]any{
			"a": map[string]any{"$ref": "#/$defs/b"},
			"b": map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"$ref": "#/$defs/a"}}},
		},
	}
	twice := map[string]any{"$ref": "#/$defs/a"}
	doubling := map[string]any{
		"type":       "object",
		"properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/a"}},
		"$defs": map[string]any{
			"a": map[string]any{"type": "array", "items": map[string]any{"allOf": []any{twice, twice}}},
		},
	}
	nested := `{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			u := newUpstream(t, eraMRTR)
			looped := rawTool(u, "looped", loop)
			doubled := rawTool(u, "doubled", doubling)
			plain := rawTool(u, "plain", map[string]any{"type": "object"})
			e := newEnv(t, envOptions{up: u})
			a := mcptest.Accept()
			cs := e.connect(clientOptions{era: era, answer: a})
			for _, c := range []struct{ tool, args, why string }{
				{"looped", `{"x":1}`, "loop"},
				{"looped", `{"x":"s"}`, "loop"},
				{"looped", `{}`, "loop"},
				{"doubled", nested, "levels down"},
				{"doubled", `{"x":[]}`, "levels down"},
			} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
				mcptest.WantToolRefusal(t, res, err, "cannot be used to check the arguments")
				mcptest.WantToolRefusal(t, res, err, c.why)
			}
			if len(a.Questions()) != 0 || e.issued() != 0 || len(looped())+len(doubled()) != 0 {
				t.Fatalf("asked %d, issued %d, forwarded %d; want none", len(a.Questions()), e.issued(), len(looped())+len(doubled()))
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "plain", Arguments: json.RawMessage(`{}`)})
			wantResult(t, res, err, "ran")
			if len(a.Questions()) != 1 || len(plain()) != 1 {
				t.Fatalf("control: asked %d, ran %d times, want once each", len(a.Questions()), len(plain()))
			}
		})
	}
}
